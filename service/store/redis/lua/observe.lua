-- Fold observations into the hosts' log-mean estimates (λ_h) of one shard.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] window (dispatches); ARGV[2] clip (log units); then per observation: host, x (ln V).
local window, clip = num(ARGV[1]), num(ARGV[2])
for i = 3, #ARGV, 2 do
  local h = get_host(ARGV[i])
  if h then
    h.mean, h.count = fold(h.mean, h.count, num(ARGV[i + 1]), window, clip)
    put_host(ARGV[i], h)
  end
end
return 0
