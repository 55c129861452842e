-- Every URL of one host (read only).
-- KEYS: the shard keys (lib.lua).  ARGV[1] host.
-- Returns {url key, record (+ lease as in get.lua), url key, record, ...},
--         {url key, estimator state (lib.lua), ...} (URLs without one are not listed).
local host = ARGV[1]
local all = redis.call('HGETALL', K_URLS .. host)
for i = 1, #all, 2 do
  local u = get_url(host, all[i])
  all[i + 1] = full_rec(all[i + 1])
  if u.lease ~= 0 then
    local l = get_lease(u.lease)
    all[i + 1] = all[i + 1] .. struct.pack('<d', l.deadline) .. l.nonce
  end
end
return {all, redis.call('HGETALL', K_EST .. host)}
