-- Fold observations into the global λ₀ log-mean estimate, atomically (no lost
-- updates between API processes).
-- KEYS[1] the global multiplier hash: mean (ln λ₀; absent = none), count.
-- ARGV[1] window (dispatches); ARGV[2] clip (log units); then x (ln V) per observation.
-- Returns {mean or '', count}.
local window, clip = num(ARGV[1]), num(ARGV[2])
local got = redis.call('HMGET', KEYS[1], 'mean', 'count')
local mean, count = num(got[1]) or NAN, num(got[2]) or 0
for i = 3, #ARGV do mean, count = fold(mean, count, num(ARGV[i]), window, clip) end
if #ARGV > 2 then
  if isnan(mean) then
    redis.call('HSET', KEYS[1], 'count', str(count))
  else
    redis.call('HSET', KEYS[1], 'mean', str(mean), 'count', str(count))
  end
end
if isnan(mean) then return {'', str(count)} end
return {str(mean), str(count)}
