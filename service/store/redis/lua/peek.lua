-- Reclaim expired leases of one shard, then list the hosts that could give out a URL
-- now, for the caller to merge shards in readiness order before leasing.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] now, Unix s; ARGV[2] n, most hosts listed of each kind; ARGV[3] lease history
-- kept; ARGV[4] most not-yet-ready hosts scanned for an open gate.
-- Returns {{host, readiness, ...} due now, {host, readiness, ...} open but not due}.
local now_arg, n, history, scan = ARGV[1], num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local now = num(now_arg)
reclaim(now_arg, history)
local due = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_arg, 'WITHSCORES', 'LIMIT', 0, n)
local ahead = {}
local later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_arg, '+inf', 'WITHSCORES',
                         'LIMIT', 0, scan)
for i = 1, #later, 2 do
  if #ahead >= 2 * n then break end
  if get_host(later[i]).gate <= now then
    ahead[#ahead + 1] = later[i]
    ahead[#ahead + 1] = later[i + 1]
  end
end
return {due, ahead}
