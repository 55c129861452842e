-- Every URL of one host (read only).
-- KEYS: the shard keys (lib.lua).  ARGV[1] host.
-- Returns {url key, record (+ lease as in get.lua), url key, record, ...},
--         {url key, estimator state (lib.lua), ...} (URLs without one are not listed).
local host = ARGV[1]
local all = redis.call('HGETALL', K_URLS .. host)
local est = {}
for i = 1, #all, 2 do
  local rec, e = unpack_entry(all[i + 1])
  local seq = struct.unpack('<I4', rec, URL_LEASE_AT)
  if seq ~= 0 then
    local l = get_lease(seq)
    rec = rec .. struct.pack('<d', l.deadline) .. l.nonce
  end
  all[i + 1] = rec
  if e ~= '' then
    est[#est + 1] = all[i]
    est[#est + 1] = e
  end
end
return {all, est}
