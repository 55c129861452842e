-- Store the thresholds a rescoring pass computed for some hosts of one shard, as
-- set_thresholds.lua does host by host: ι and Λ scored per URL, due times re-derived,
-- each host's scored Λ; a host or URL gone since the read is skipped.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] revisit cap, s; ARGV[2] the thresholds ι, s, packed doubles in the order of
-- the URL keys below; then per host: host, Λ scored, its URL keys as one string (each
-- a uint16 length, then its bytes).
-- Returns the URLs updated.
local cap, thr = num(ARGV[1]), ARGV[2]
local pos, n = 1, 0
local touched = {}
for a = 3, #ARGV, 3 do
  local host, slam, keys = ARGV[a], num(ARGV[a + 1]), ARGV[a + 2]
  local h = get_host(host)
  local at = 1
  while at <= #keys do
    local len
    len, at = struct.unpack('<H', keys, at)
    local ukey, t = string.sub(keys, at, at + len - 1), struct.unpack('<d', thr, pos)
    at, pos = at + len, pos + 8
    local u = h and get_url(host, ukey)
    if u then
      u.thr, u.slam = t, slam
      move(host, ukey, u, due_time(u, cap))
      put_url(host, ukey, u)
      n = n + 1
    end
  end
  if h then
    h.scored = slam
    put_host(host, h)
    touched[host] = true
  end
end
refresh_all(touched)
return n
