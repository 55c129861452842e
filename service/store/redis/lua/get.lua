-- Snapshots of URLs of one shard (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1]: the URLs, "host url-key" each, separated by spaces (none of them holds
-- white space).
-- Returns per URL two items: its full record (lib.lua get_rec), followed for a leased URL
-- by the lease deadline (packed double) and nonce, or false (unknown URL); its packed
-- estimator state (lib.lua) or false (none: the defaults).
local out = {}
for host, ukey in string.gmatch(ARGV[1], '(%S+) (%S+)') do
  local s, e = get_rec(host, ukey)
  if s then
    local seq = struct.unpack('<I4', s, URL_LEASE_AT)
    if seq ~= 0 then
      local l = get_lease(seq)
      s = s .. struct.pack('<d', l.deadline) .. l.nonce
    end
    if e == '' then e = false end
  else
    s, e = false, false
  end
  out[#out + 1] = s
  out[#out + 1] = e
end
return out
