-- Fold observations into the global λ₀ log-mean estimate, atomically (no lost
-- updates between API processes).
-- KEYS[1] the global multiplier hash: mean (ln λ₀; absent = none), count, var.
-- ARGV[1] window (dispatches); ARGV[2] clip (log units); ARGV[3] x (ln V) per
-- observation, packed '<d' each (lib.lua fold_lambda0).
-- Returns {mean or '', count, var}, as the hash holds them.
local mean, count, var = fold_lambda0(KEYS[1], ARGV[3], num(ARGV[1]), num(ARGV[2]))
if isnan(mean) then return {'', str(count), str(var)} end
return {str(mean), str(count), str(var)}
