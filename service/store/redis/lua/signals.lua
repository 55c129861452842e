-- Count change-indicating signals of one shard; each counted one moves its URL's due
-- time earlier by β (MATH.md "Due time"; signals within T_DELAY of a crawl are stale).
-- Every signal of a known URL, stale or not, counts in its decayed signal count.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] T_DELAY, s; ARGV[2] revisit cap, s; ARGV[3] decay time constant T, s; ARGV[4]
-- the signals, "host url-key time" (Unix s) each, separated by spaces (none of them
-- holds white space); ARGV[5] how long the answer is remembered under KEYS[10] (if given:
-- lib.lua once_replay), wall ms.
-- Returns per signal 0 accepted, 1 unknown URL, 2 stale.
local seen = once_replay()
if seen then return seen end
local discard, cap, decay = num(ARGV[1]), num(ARGV[2]), num(ARGV[3])
local out = {}
local touched, earlier = {}, {}
for host, ukey, t in string.gmatch(ARGV[4], '(%S+) (%S+) (%S+)') do
  out[#out + 1] = apply_signal(host, ukey, num(t), discard, cap, decay, touched, earlier)
end
refresh_all(touched)
refresh_earlier(earlier, touched)
once_remember(out, ARGV[5])
return out
