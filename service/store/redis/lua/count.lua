-- Reclaim expired leases of one shard, then count its hosts that could give out a URL:
-- for the caller to share a /next batch over the shards.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] now, Unix s; ARGV[2] lease history kept.
-- Returns {hosts due now, hosts not due yet (their gate may still be closed)}.
local now_arg, history = ARGV[1], num(ARGV[2])
reclaim(now_arg, history)
local due = redis.call('ZCOUNT', K_READY, '-inf', now_arg)
return {due, redis.call('ZCARD', K_READY) - due}
