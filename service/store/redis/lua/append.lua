-- Append a batch's signals or clicks of one shard to the shard's event stream, as one
-- entry of packed columns, for fold.lua to apply.
-- KEYS[1] the shard's event stream (keys.py ShardKeys.events); KEYS[2] optional, only
-- under an idempotency key: this batch's record in this shard (ShardKeys.once).
-- ARGV[1] how long the record under KEYS[2] is kept, wall ms; ARGV[2] kind, 's' signals
-- or 'c' clicks; ARGV[3] the event times, m little-endian doubles (Unix s); ARGV[4] the
-- hosts, m names separated by single spaces; ARGV[5] the URL keys (keys.py url_key), m,
-- separated by single spaces (none of the names holds white space).
-- Returns 1 appended, 0 appended before (a repeat under the same key: nothing changes).
local stream, once = KEYS[1], KEYS[2]
if once and redis.call('EXISTS', once) == 1 then return 0 end
redis.call('XADD', stream, '*', 'k', ARGV[2], 't', ARGV[3], 'h', ARGV[4], 'u', ARGV[5])
if once then redis.call('SET', once, '1', 'PX', ARGV[1]) end
return 1
