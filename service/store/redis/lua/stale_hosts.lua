-- Hosts of one shard whose threshold Λ_h = λ₀ + λ_h drifted from the Λ their URLs
-- were scored for by more than the tolerance (read only).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] ln λ₀ or '' (none yet); ARGV[2] tolerance as a log ratio.
-- Returns per stale host: host, drift (log ratio or 'inf'), Λ_h, URLs.
local lam0 = num(ARGV[1])
local limit = num(ARGV[2])
if lam0 then lam0 = math.exp(lam0) end
local all = redis.call('HGETALL', K_HOSTS)
local out = {}
for i = 1, #all, 2 do
  local nurls = redis.call('HLEN', K_URLS .. all[i])
  if nurls > 0 then
    local _, _, mean, _, scored = struct.unpack(HOST, all[i + 1])
    local target = 0
    if lam0 then
      target = lam0
      -- the host's mean is ln(Λ_h / λ₀) (scheduler_core/multipliers.py)
      if not isnan(mean) then target = lam0 * math.max(1, math.exp(mean)) end
    end
    local drift
    if isnan(scored) or (scored > 0) ~= (target > 0) then
      drift = INF
    elseif target > 0 then
      drift = math.abs(math.log(target / scored))
    end
    if drift and drift > limit then
      out[#out + 1] = all[i]
      out[#out + 1] = str(drift)
      out[#out + 1] = str(target)
      out[#out + 1] = nurls
    end
  end
end
return out
