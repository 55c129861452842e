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
local touched = {}
for host, ukey, t in string.gmatch(ARGV[4], '(%S+) (%S+) (%S+)') do
  t = num(t)
  local u = get_url(host, ukey)
  if not u then
    out[#out + 1] = 1
  else
    u.signals = u.signals + 1
    est_add_event(host, ukey, EST_SIGNALS, t, decay)
    if not isnan(u.last) and t <= u.last + discard then
      out[#out + 1] = 2
    else
      if not isnan(u.last) then u.n = u.n + 1 end
      if isnan(u.lsig) or t > u.lsig then u.lsig = t end
      unretire(host, u)  -- a signal brings a retired URL back
      if move(host, ukey, u, due_time(u, cap)) then touched[host] = true end
      out[#out + 1] = 0
    end
    put_url(host, ukey, u)
  end
end
refresh_all(touched)
once_remember(out, ARGV[5])
return out
