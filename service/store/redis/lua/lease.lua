-- Lease URLs of one shard: up to k_due + k_ahead hosts, those due now first (readiness
-- order), then at most k_ahead hosts not yet due whose politeness gate is open
-- (readiness order: their URLs go out below threshold).  One URL per host, its earliest
-- due; the host's gate moves to now + crawl delay.  `now` is read here, from the server's
-- TIME through the caller's clock (lib.lua clock_now).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] the clock, "start speed epoch" (lib.lua clock_now); ARGV[2] k_due; ARGV[3]
-- k_ahead; ARGV[4] lease TTL, s; ARGV[5] nonce of this call (no white space); ARGV[6]
-- lease history kept; ARGV[7] most not-yet-due hosts scanned for an open gate.
-- Returns {now (Unix s), deadline of the leases (Unix s), grants}, grants flat: per grant
-- host, url key, packed record (as leased), lease seq, gated (0/1), readiness the host
-- had (Unix s), the host's log-mean estimate (ln Λ_h; '' = none).
local now = clock_now(ARGV[1])
local now_arg = str(now)
local k_due, k_ahead, ttl = num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local nonce, history, scan = ARGV[5], num(ARGV[6]), num(ARGV[7])
local deadline = now + ttl
reclaim(now, history)

-- which hosts: due ones, then open ones among the not yet due
local chosen = {}
local records = {}
if k_due + k_ahead > 0 then
  local due = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_arg, 'LIMIT', 0, k_due + k_ahead)
  if #due > 0 then
    local recs = bulk('HMGET', K_HOSTS, due, 1)
    for i, host in ipairs(due) do
      chosen[#chosen + 1] = host
      records[host] = recs[i]
    end
  end
end
local ahead, offset = 0, 0
k_ahead = math.min(k_ahead, k_due + k_ahead - #chosen)
while ahead < k_ahead and offset < scan do
  local chunk = math.min(2 * (k_ahead - ahead) + 16, scan - offset)
  local later = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_arg, '+inf', 'LIMIT', offset, chunk)
  if #later == 0 then break end
  local recs = bulk('HMGET', K_HOSTS, later, 1)
  for i, host in ipairs(later) do
    if ahead < k_ahead and select(2, struct.unpack(HOST, recs[i])) <= now then
      chosen[#chosen + 1] = host
      records[host] = recs[i]
      ahead = ahead + 1
    end
  end
  offset = offset + #later
end
if #chosen == 0 then return {now_arg, str(deadline), {}} end

-- lease one URL of each; the writes shared by all go out in one call each
local seq0 = redis.call('HINCRBY', K_META, 'lseq', #chosen) - #chosen
local out, host_recs, ready, gone, leases, deadlines = {}, {}, {}, {}, {}, {}
for i, host in ipairs(chosen) do
  local h = {}
  h.delay, h.gate, h.mean, h.count, h.scored = struct.unpack(HOST, records[host])
  local q = K_QUEUE .. host
  local ukey = redis.call('ZPOPMIN', q)[1]
  -- only `due` is read and only `lease` written: no need to unpack the whole record
  local rec = redis.call('HGET', K_URLS .. host, ukey)
  local due = struct.unpack('<d', rec, URL_DUE_AT)
  local gated = 0
  if due <= now and h.gate > due then gated = 1 end
  local was_ready = math.max(due, h.gate)
  h.gate = now + h.delay
  local seq = seq0 + i
  rec = string.sub(rec, 1, URL_LEASE_AT - 1) .. struct.pack('<I4', seq)
  redis.call('HSET', K_URLS .. host, ukey, rec)
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if head[1] then
    ready[#ready + 1] = math.max(num(head[2]), h.gate)
    ready[#ready + 1] = host
  else
    gone[#gone + 1] = host
  end
  host_recs[#host_recs + 1] = host
  host_recs[#host_recs + 1] = struct.pack(HOST, h.delay, h.gate, h.mean, h.count, h.scored)
  leases[#leases + 1] = seq
  leases[#leases + 1] = pack_lease({status = ACTIVE, deadline = deadline, issued = now,
                                    nonce = nonce, host = host, ukey = ukey})
  deadlines[#deadlines + 1] = deadline
  deadlines[#deadlines + 1] = seq
  local mean = ''
  if not isnan(h.mean) then mean = str(h.mean) end
  for _, v in ipairs({host, ukey, rec, seq, gated, str(was_ready), mean}) do out[#out + 1] = v end
end
bulk('HSET', K_HOSTS, host_recs, 2)
bulk('ZADD', K_READY, ready, 2)
bulk('ZREM', K_READY, gone, 1)
bulk('HSET', K_LEASES, leases, 2)
bulk('ZADD', K_DEADLINES, deadlines, 2)
return {now_arg, str(deadline), out}
