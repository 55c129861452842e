-- Count clicks (requests) of one shard, also in the URL's decayed click count.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] decay time constant T, s; ARGV[2] the clicks, "host url-key time" (Unix s)
-- each, separated by spaces; ARGV[3] how long the answer is remembered under KEYS[10]
-- (if given: lib.lua once_replay), wall ms.
-- Returns per click 0 accepted, 1 unknown URL.
local seen = once_replay()
if seen then return seen end
local decay = num(ARGV[1])
local out = {}
for host, ukey, t in string.gmatch(ARGV[2], '(%S+) (%S+) (%S+)') do
  out[#out + 1] = apply_click(host, ukey, num(t), decay)
end
once_remember(out, ARGV[3])
return out
