-- Drop URLs of one shard, their estimator state and their leases.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] lease history kept per shard; then per URL: host, url key.
-- Returns how many URLs existed.
local history = num(ARGV[1])
local removed = 0
local touched = {}
for i = 2, #ARGV, 2 do
  local host, ukey = ARGV[i], ARGV[i + 1]
  local u = get_url(host, ukey)
  if u then
    removed = removed + 1
    redis.call('HDEL', K_URLS .. host, ukey)
    redis.call('HINCRBY', K_META, 'urls', -1)
    if not isnan(u.retired) then
      redis.call('HINCRBY', K_META, 'retired', -1)
      local h = get_host(host)
      if h.retired > 0 then h.retired = h.retired - 1; put_host(host, h) end
    end
    if u.lease ~= 0 then
      finish(u.lease, get_lease(u.lease), EXPIRED)
      lease_ended(host)
    else
      redis.call('ZREM', K_QUEUE .. host, ukey)
    end
    touched[host] = true
  end
end
refresh_all(touched)
trim_history(history)
return removed
