-- Reclaim expired leases of one shard, then list the readiness of the hosts that could
-- give out a URL now: up to `wanted` due hosts and, when fewer are due, open hosts not
-- yet due; for the caller to share a /next batch over the shards as one sorted set of
-- all hosts would (most overdue first, then the soonest due).  `now` is read here, from
-- the server's TIME through the caller's clock (lib.lua clock_now).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] the clock, "start speed epoch" (lib.lua clock_now); ARGV[2] lease history kept;
-- ARGV[3] hosts wanted; ARGV[4] most not-yet-due hosts scanned for an open politeness
-- gate; ARGV[5] most hosts listed of each kind (the caller asks again with more when a
-- shard's list ran out).
-- Returns {{host, readiness (Unix s), ...} due, {host, readiness, ...} open, not yet due,
-- now (Unix s)}.
local history, want, scan = num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local limit = num(ARGV[5])
local now = clock_now(ARGV[1])
local now_arg = str(now)
reclaim(now, history)
local due = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_arg, 'WITHSCORES', 'LIMIT', 0, limit)
local out = {}
local need, offset = 0, 0
if #due / 2 < limit then  -- all due hosts listed: the not-yet-due may be needed
  need = math.min(want - #due / 2, limit)
end
while #out / 2 < need and offset < scan do
  local chunk = math.min(2 * (need - #out / 2) + 16, scan - offset)
  local later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_arg, '+inf', 'WITHSCORES',
                           'LIMIT', offset, chunk)
  if #later == 0 then break end
  local hosts = {}
  for i = 1, #later, 2 do hosts[#hosts + 1] = later[i] end
  local recs = bulk('HMGET', K_HOSTS, hosts, 1)
  for j, rec in ipairs(recs) do
    if #out / 2 < need and select(2, struct.unpack(HOST, rec)) <= now then
      out[#out + 1] = later[2 * j - 1]
      out[#out + 1] = later[2 * j]
    end
  end
  offset = offset + #hosts
end
return {due, out, now_arg}
