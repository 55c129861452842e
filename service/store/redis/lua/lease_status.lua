-- Status of lease seqs of one shard (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV: per lease: seq, nonce.
-- Returns per lease: status (0 unknown, 1 active, 2 expired, 3 settled), host, url key,
-- issue time (Unix s; '' when unknown).
local out = {}
for i = 1, #ARGV, 2 do
  local l = get_lease(ARGV[i])
  if l and l.nonce == ARGV[i + 1] then
    out[#out + 1] = l.status
    out[#out + 1] = l.host
    out[#out + 1] = l.ukey
    if isnan(l.issued) then out[#out + 1] = '' else out[#out + 1] = str(l.issued) end
  else
    out[#out + 1] = 0
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  end
end
return out
