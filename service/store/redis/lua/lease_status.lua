-- Status of lease seqs of one shard (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1]: the leases, "seq nonce" each, separated by spaces (one argument: cheaper to
-- send than two per lease).
-- Returns per lease: status (0 unknown, 1 active, 2 expired, 3 settled), host, url key,
-- issue time (Unix s; '' when unknown).
local out = {}
for seq, nonce in string.gmatch(ARGV[1], '(%S+) (%S+)') do
  local l = get_lease(seq)
  if l and l.nonce == nonce then
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
