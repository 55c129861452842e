-- Count clicks (requests) of one shard.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] the clicks, "host url-key time" (Unix s) each, separated by spaces.
-- Returns per click 0 accepted, 1 unknown URL.
local out = {}
for host, ukey, t in string.gmatch(ARGV[1], '(%S+) (%S+) (%S+)') do
  t = num(t)
  local u = get_url(host, ukey)
  if not u then
    out[#out + 1] = 1
  else
    u.clicks = u.clicks + 1
    if isnan(u.lclick) or t > u.lclick then u.lclick = t end
    put_url(host, ukey, u)
    out[#out + 1] = 0
  end
end
return out
