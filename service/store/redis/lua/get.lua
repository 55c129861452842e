-- Snapshots of URLs of one shard (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV: per URL: host, url key.
-- Returns per URL false (unknown) or {packed record, followed for a leased URL by the
-- lease deadline (packed double) and nonce; packed estimator state (EST) or false}.
local out = {}
for i = 1, #ARGV, 2 do
  local host, ukey = ARGV[i], ARGV[i + 1]
  local s = redis.call('HGET', K_URLS .. host, ukey)
  if s then
    local seq = struct.unpack('<I4', s, URL_LEASE_AT)
    if seq ~= 0 then
      local l = get_lease(seq)
      s = s .. struct.pack('<d', l.deadline) .. l.nonce
    end
    out[#out + 1] = {s, redis.call('HGET', K_EST .. host, ukey)}
  else
    out[#out + 1] = false
  end
end
return out
