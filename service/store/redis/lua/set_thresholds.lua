-- Store ι per URL of one host, scored for Λ; re-derive due times.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] host; ARGV[2] Λ scored; ARGV[3] revisit cap, s; then per URL: url key, ι (s).
local host, slam, cap = ARGV[1], num(ARGV[2]), num(ARGV[3])
local h = get_host(host)
if not h then return 0 end
local n = 0
for i = 4, #ARGV, 2 do
  local u = get_url(host, ARGV[i])
  if u then
    u.thr, u.slam = num(ARGV[i + 1]), slam
    move(host, ARGV[i], u, due_time(u, cap))
    put_url(host, ARGV[i], u)
    n = n + 1
  end
end
h.scored = slam
put_host(host, h)
refresh_all({[host] = true})
return n
