-- One host's snapshot (read only).
-- KEYS: the shard keys (lib.lua).  ARGV[1] host; ARGV[2] now, Unix s.
-- Returns false, or {host record, URLs, queued, due by now, earliest due or ''}.
local host = ARGV[1]
local rec = redis.call('HGET', K_HOSTS, host)
if not rec then return false end
local q = K_QUEUE .. host
local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
return {rec, redis.call('HLEN', K_URLS .. host), redis.call('ZCARD', q),
        redis.call('ZCOUNT', q, '-inf', qscore_at(num(ARGV[2]))), head_due(host, head)}
