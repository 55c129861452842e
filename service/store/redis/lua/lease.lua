-- Lease URLs of one shard: hosts due now first (readiness order), then, up to the
-- total, not-yet-due URLs of hosts whose politeness gate is open (readiness order).
-- One URL per host: its gate moves to now + crawl delay.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] now, Unix s; ARGV[2] most due hosts; ARGV[3] most hosts in all, counting the
-- due ones (0: none not yet due); ARGV[4] lease
-- TTL, s; ARGV[5] nonce of this call (no white space); ARGV[6] lease history kept;
-- ARGV[7] most not-yet-ready hosts scanned for an open gate.
-- Returns per grant: host, url key, packed record (as leased), lease seq, gated (0/1),
-- readiness the host had (Unix s).
local now_arg = ARGV[1]
local now, k_due, k_total, ttl = num(now_arg), num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local nonce, history, scan = ARGV[5], num(ARGV[6]), num(ARGV[7])
reclaim(now_arg, history)
local out = {}
local taken = 0

local function lease_one(host)
  local h = get_host(host)
  local ukey = redis.call('ZPOPMIN', K_QUEUE .. host)[1]
  local u = get_url(host, ukey)
  local gated = 0
  if u.due <= now and h.gate > u.due then gated = 1 end
  local ready = math.max(u.due, h.gate)
  h.gate = now + h.delay
  put_host(host, h)
  refresh(host, h.gate)
  local seq = redis.call('HINCRBY', K_META, 'lseq', 1)
  local deadline = now + ttl
  put_lease(seq, {status = ACTIVE, deadline = deadline, nonce = nonce, host = host, ukey = ukey})
  redis.call('ZADD', K_DEADLINES, deadline, seq)
  u.lease = seq
  local rec = pack_url(u)
  redis.call('HSET', K_URLS .. host, ukey, rec)
  out[#out + 1] = host
  out[#out + 1] = ukey
  out[#out + 1] = rec
  out[#out + 1] = seq
  out[#out + 1] = gated
  out[#out + 1] = str(ready)
  taken = taken + 1
end

while taken < k_due do
  local head = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_arg, 'LIMIT', 0, 1)
  if not head[1] then break end
  lease_one(head[1])
end
if taken < k_total then
  local later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_arg, '+inf', 'LIMIT', 0, scan)
  for _, host in ipairs(later) do
    if taken >= k_total then break end
    if get_host(host).gate <= now then lease_one(host) end
  end
end
return out
