-- Fold observations into the hosts' log-mean estimates (λ_h) of one shard.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] window (dispatches); ARGV[2] clip (log units); then per observation: host, x (ln V).
local window, clip = num(ARGV[1]), num(ARGV[2])
local obs = {}
for i = 3, #ARGV, 2 do
  obs[#obs + 1] = ARGV[i]
  obs[#obs + 1] = num(ARGV[i + 1])
end
fold_hosts(obs, window, clip)
return 0
