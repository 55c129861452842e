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
  t = num(t)
  local key = K_URLS .. host
  local rec = redis.call('HGET', key, ukey)
  if not rec then
    out[#out + 1] = 1
  else
    -- two fields change: rewrite them in place, not the whole record
    local last = struct.unpack('<d', rec, URL_LCLICK_AT)
    if isnan(last) or t > last then last = t end
    local clicks = struct.unpack('<I4', rec, URL_CLICKS_AT) + 1
    redis.call('HSET', key, ukey,
      string.sub(rec, 1, URL_LCLICK_AT - 1) .. struct.pack('<d', last)
      .. string.sub(rec, URL_LCLICK_AT + 8, URL_CLICKS_AT - 1) .. struct.pack('<I4', clicks)
      .. string.sub(rec, URL_CLICKS_AT + 4))
    est_add_event(host, ukey, EST_CLICKS, t, decay)
    out[#out + 1] = 0
  end
end
once_remember(out, ARGV[3])
return out
