-- Store new parameters and ι of URLs of one shard, host by host, each host's URLs
-- scored for its Λ; re-derive due times.  The hosts' own scored Λ are left as they
-- are; unknown URLs are skipped.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] revisit cap, s; ARGV[2] per host "host Λ-scored k url-key-1 ... url-key-k",
-- all separated by spaces (none of them holds white space); ARGV[3] the URLs'
-- parameters in the same order, 6 packed doubles each (W 1/s, Δ 1/s, recall, ν 1/s,
-- β s, ι s), concatenated.
-- Returns how many URLs were known.
local cap, params = num(ARGV[1]), ARGV[3]
local words = string.gmatch(ARGV[2], '%S+')
local n, at = 0, 1
local touched = {}
for host in words do
  local slam, k = num(words()), num(words())
  for _ = 1, k do
    local ukey = words()
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
