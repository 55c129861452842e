-- Count clicks (requests) of one shard.
-- KEYS: the shard keys (lib.lua).
-- ARGV: per click: host, url key, time (Unix s).
-- Returns per click 0 accepted, 1 unknown URL.
local out = {}
for i = 1, #ARGV, 3 do
  local host, ukey, t = ARGV[i], ARGV[i + 1], num(ARGV[i + 2])
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
