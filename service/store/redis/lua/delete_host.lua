-- Drop one host (DELETE /hosts/{host}): its URLs (retired ones too), their estimator
-- state and leases, its queue and its record.
-- KEYS: the shard keys (lib.lua).  ARGV[1] host; ARGV[2] lease history kept per shard.
-- Returns how many URLs it had.
local host = ARGV[1]
local h = get_host(host)
if not h then return 0 end
local all = redis.call('HGETALL', K_URLS .. host)
for i = 1, #all, 2 do
  local u = get_url(host, all[i])
  if u.lease ~= 0 then
    finish(u.lease, get_lease(u.lease), EXPIRED)
  end
end
local n = #all / 2
redis.call('DEL', K_URLS .. host, K_QUEUE .. host)
redis.call('HDEL', K_HOSTS, host)
redis.call('ZREM', K_READY, host)
if n > 0 then redis.call('HINCRBY', K_META, 'urls', -n) end  -- (-0 is not an integer)
if h.retired > 0 then redis.call('HINCRBY', K_META, 'retired', -h.retired) end
trim_history(num(ARGV[2]))
return n
