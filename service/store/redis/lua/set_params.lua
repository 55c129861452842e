-- Store new parameters and ι of URLs of one host, scored for Λ; re-derive due times.
-- The host's own scored Λ is left as it is; unknown URLs are skipped.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] host; ARGV[2] Λ scored; ARGV[3] revisit cap, s; then per URL: url key, 6
-- packed doubles (W 1/s, Δ 1/s, recall, ν 1/s, β s, ι s).
-- Returns how many URLs were known.
local host, slam, cap = ARGV[1], num(ARGV[2]), num(ARGV[3])
local n = 0
for i = 4, #ARGV, 2 do
  local u = get_url(host, ARGV[i])
  if u then
    u.w, u.delta, u.recall, u.nu, u.beta, u.thr = struct.unpack('<dddddd', ARGV[i + 1])
    u.slam = slam
    move(host, ARGV[i], u, due_time(u, cap))
    put_url(host, ARGV[i], u)
    n = n + 1
  end
end
if n > 0 then refresh_all({[host] = true}) end
return n
