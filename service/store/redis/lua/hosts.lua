-- Every host of one shard with its counts, for GET /hosts (read only).
-- KEYS: the shard keys (lib.lua).  ARGV[1] now, Unix s.
-- Returns {host, record, URLs, queued, due by now, earliest due or '', ...}.
local all = redis.call('HGETALL', K_HOSTS)
local out = {}
for i = 1, #all, 2 do
  local host = all[i]
  local q = K_QUEUE .. host
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  for _, v in ipairs({host, all[i + 1], redis.call('HLEN', K_URLS .. host), redis.call('ZCARD', q),
                      redis.call('ZCOUNT', q, '-inf', qscore_at(num(ARGV[1]))), head_due(host, head)}) do
    out[#out + 1] = v
  end
end
return out
