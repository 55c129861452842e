-- Snapshots of URLs of one shard (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV: per URL: host, url key.
-- Returns per URL false (unknown) or the packed record, followed for a leased URL by
-- the lease deadline (packed double) and nonce.
local out = {}
for i = 1, #ARGV, 2 do
  local s = redis.call('HGET', K_URLS .. ARGV[i], ARGV[i + 1])
  out[#out + 1] = s
  if s then
    local u = get_url(ARGV[i], ARGV[i + 1])
    if u.lease ~= 0 then
      local l = get_lease(u.lease)
      out[#out] = s .. struct.pack('<d', l.deadline) .. l.nonce
    end
  end
end
return out
