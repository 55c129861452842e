-- Hosts of one shard whose threshold Λ_h = λ₀ + λ_h drifted from the Λ their URLs
-- were scored for by more than the tolerance (read only), among one slice of the
-- shard's hosts: those HSCAN gives from `cursor` with COUNT `count` (the caller calls
-- again from the cursor answered until it is '0'; a host may come twice, and one added
-- or removed meanwhile may come or not).  A slice's work is bounded by `count` (about
-- that many hosts, or all of them while the hash is a listpack, itself bounded by
-- hash-max-listpack-entries), not by the shard's size: no call holds the server long.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] ln λ₀ or '' (none yet); ARGV[2] tolerance as a log ratio; ARGV[3] cursor
-- ('0' to start); ARGV[4] count, hosts per slice.
-- Returns {next cursor ('0': done), {host, drift (log ratio or 'inf'), Λ_h, URLs, ...}
-- per stale host of the slice}.
local lam0 = num(ARGV[1])
local limit = num(ARGV[2])
if lam0 then lam0 = math.exp(lam0) end
local got = redis.call('HSCAN', K_HOSTS, ARGV[3], 'COUNT', ARGV[4])
local all = got[2]
local out = {}
for i = 1, #all, 2 do
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
    -- a host without URLs is never stale (its URL count read for the stale ones alone)
    local nurls = redis.call('HLEN', K_URLS .. all[i])
    if nurls > 0 then
      out[#out + 1] = all[i]
      out[#out + 1] = str(drift)
      out[#out + 1] = str(target)
      out[#out + 1] = nurls
    end
  end
end
return {got[1], out}
