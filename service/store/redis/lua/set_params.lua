-- Store new parameters and ι of URLs of one shard, host by host, each host's URLs
-- scored for its Λ; re-derive due times.  The hosts' own scored Λ are left as they
-- are; unknown URLs are skipped.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] revisit cap, s; then per host: host, Λ scored, its URL keys separated by
-- spaces (none holds white space), and their parameters in the same order, 6 packed
-- doubles each (W 1/s, Δ 1/s, recall, ν 1/s, β s, ι s), concatenated.
-- Returns how many URLs were known.
local cap = num(ARGV[1])
local n = 0
local touched = {}
for i = 2, #ARGV, 4 do
  local host, slam, params = ARGV[i], num(ARGV[i + 1]), ARGV[i + 3]
  local at = 1
  for ukey in string.gmatch(ARGV[i + 2], '%S+') do
    local u = get_url(host, ukey)
    if u then
      u.w, u.delta, u.recall, u.nu, u.beta, u.thr = struct.unpack('<dddddd', params, at)
      u.slam = slam
      move(host, ukey, u, due_time(u, cap))
      put_url(host, ukey, u)
      touched[host] = true
      n = n + 1
    end
    at = at + 48
  end
end
refresh_all(touched)
return n
