-- An operator's change to one host (PATCH /hosts/{host}); it holds from the next lease
-- call on every API process.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] host; ARGV[2] crawl delay, s ('' = unchanged); ARGV[3] in-flight cap ('' =
-- unchanged); ARGV[4] blocked until, Unix s ('' = unchanged; 0 unblocks and forgets the
-- back-off's failures); ARGV[5] paused, '1' or '0' ('' = unchanged); ARGV[6] now, Unix s.
-- Returns false (unknown host), or {host record, URLs, queued, due by now, earliest due
-- or ''} as host.lua.
local host = ARGV[1]
local h = get_host(host)
if not h then return false end
if ARGV[2] ~= '' then h.delay = num(ARGV[2]) end
if ARGV[3] ~= '' then h.cap = num(ARGV[3]) end
if ARGV[4] ~= '' then
  local untl = num(ARGV[4])
  if untl == 0 then
    h.blocked, h.reason, h.failures = NAN, 0, 0
  else
    h.blocked, h.reason = untl, BLOCK_OPERATOR
  end
end
if ARGV[5] ~= '' then h.paused = num(ARGV[5]) end
put_host(host, h)
refresh_all({[host] = true})
local q = K_QUEUE .. host
local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
return {redis.call('HGET', K_HOSTS, host), redis.call('HLEN', K_URLS .. host),
        redis.call('ZCARD', q), redis.call('ZCOUNT', q, '-inf', qscore_at(num(ARGV[6]))), head_due(host, head)}
