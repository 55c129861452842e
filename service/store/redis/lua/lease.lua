#!lua flags=allow-cross-slot-keys
-- Lease URLs from all the shards one node holds, in one call: reclaim their expired
-- leases, merge their ready sets as one sorted set of all hosts would (readiness, then
-- host name, bytewise), take up to `cap` hosts due now, earliest first, then at most
-- `k_ahead` of the rest among hosts not yet due whose politeness gate is open (soonest
-- first; their URLs go out below threshold), and lease one URL of each, its earliest
-- due.  The host's gate moves to now + crawl delay, its leases out up by one.  A host
-- paused, blocked or with its cap of leases out gives nothing (lib.lua host_ready); a
-- URL within the minimum revisit interval of its last fetch, or before its refetch_after,
-- is not leased but queued again at that time (the host gives nothing in this call).  `now` is read here, from the
-- server's TIME through the caller's clock (lib.lua clock_now).  Before that, the
-- dispatch observations the caller buffered are folded into λ₀ and the λ_h of their
-- hosts (as lambda0.lua, then observe.lua).
-- With mode 'plan' nothing is leased (nor folded): the answer lists the hosts this
-- node would give, for the caller to share a batch over several nodes.
-- The shebang flag lets one call touch the slots of several shards; on a Redis Cluster
-- the caller sends it to the node that holds them all.  It declares the keys of one
-- shard only (a cluster routes by the declared keys, which must share a slot): the
-- others come in one argument.
-- KEYS: 9 per shard, in lib.lua's order, for the first S − U of the call's S shards;
-- then, optionally, the global multiplier hash (mean = ln λ₀, count, var).
-- ARGV[1] the clock, "start speed epoch" (lib.lua clock_now); ARGV[2] mode, 'lease' or
-- 'plan'; ARGV[3] cap, most hosts in all; ARGV[4] k_ahead, most of them not yet due;
-- ARGV[5] lease TTL, s; ARGV[6] nonce of this call (no white space); ARGV[7] lease
-- history kept per shard; ARGV[8] most not-yet-due hosts scanned per shard for an open
-- gate; ARGV[9] S, shards in the call; ARGV[10] U; ARGV[11] the one host to lease from
-- ('' = any; then the call holds that host's shard alone); ARGV[12] the key tag of each
-- of the S shards (the part of its key names before lib.lua's names), one string, a
-- line each: the keys of the last U shards are their tags followed by the names the
-- first shard's declared keys have after its tag; then: window (dispatches), clip (log
-- units) of the multiplier fold; the ln V of the ungated dispatches, '<d' each, one
-- string (for λ₀; only with the multiplier key); the dispatch observations, one string:
-- per observation OBS (shard index 1..S, 1 when gated else 0, ln V of a gated one, host
-- length), then the host.
-- A host's mean is ln(Λ_h / λ₀) (scheduler_core/multipliers.py): a gated dispatch adds
-- ln V − ln λ₀ (λ₀ after the fold), an ungated one 0.
-- A lease is gated (held back by politeness) when its URL was due before the host's gate
-- opened and it goes out within BOUND_SLACK crawl delays of the opening.
local GRANT = '<ddI4HHHB'
local OBS = '<HBdH'  -- a dispatch observation, then its host (dispatch.py _OBS)
local BOUND_SLACK = 0.5  -- as scheduler_core.multipliers.BOUND_SLACK
local COUNTS_HEAD_ZERO = string.rep('\0', 24)  -- the counts but the lease seq, all 0
local now = clock_now(ARGV[1])
local now_arg = str(now)
local mode, cap, k_ahead, ttl = ARGV[2], num(ARGV[3]), num(ARGV[4]), num(ARGV[5])
local nonce, history, scan, S = ARGV[6], num(ARGV[7]), num(ARGV[8]), num(ARGV[9])
local U = num(ARGV[10])
local deadline = now + ttl
local deadline_s = str(deadline)
local SHARD_KEYS = {}
for i = 1, 9 * (S - U) do SHARD_KEYS[i] = KEYS[i] end
local only = ARGV[11]
do  -- the undeclared shards' keys: tag .. name (splitting one line per key costs more)
  local tags, at = {}, 1
  while at <= #ARGV[12] do
    local stop = string.find(ARGV[12], '\n', at, true) or #ARGV[12] + 1
    tags[#tags + 1] = string.sub(ARGV[12], at, stop - 1)
    at = stop + 1
  end
  local names, skip = {}, #tags[1]
  for i = 1, 9 do names[i] = string.sub(KEYS[i], skip + 1) end
  for t = S - U + 1, S do
    local tag = tags[t]
    for i = 1, 9 do SHARD_KEYS[#SHARD_KEYS + 1] = tag .. names[i] end
  end
end
local A = 12  -- ARGV[A + 1] is the window
local K_MULT = KEYS[9 * (S - U) + 1]
K_ONCE = nil

-- the buffered dispatch observations: λ₀ first, then the hosts' λ_h
local log_lam0, lam0_count = NAN, ''
if K_MULT then
  local window, clip = num(ARGV[A + 1]), num(ARGV[A + 2])
  local free, obs = ARGV[A + 3], ARGV[A + 4]
  local mean, count = fold_lambda0(K_MULT, free, window, clip)
  log_lam0, lam0_count = mean, str(count)
  local by_shard = {}  -- shard index -> host, x, host, x, ... in the order given
  local at = 1
  while at <= #obs do
    local s, gated, v, len
    s, gated, v, len, at = struct.unpack(OBS, obs, at)
    local host = string.sub(obs, at, at + len - 1)
    at = at + len
    local x = v - log_lam0  -- NaN: no λ₀
    if gated == 0 then x = log_lam0 - log_lam0 end
    if not isnan(x) then
      local l = by_shard[s]
      if not l then l = {}; by_shard[s] = l end
      l[#l + 1] = host
      l[#l + 1] = x
    end
  end
  for s, l in pairs(by_shard) do
    use_shard(SHARD_KEYS, s)
    fold_hosts(l, window, clip)
  end
end

for s = 1, S do
  use_shard(SHARD_KEYS, s)
  reclaim(now, history)
end

-- a < b for host names, bytewise (the order of a sorted set's members of one score).
-- Lua's own `<` on strings follows the server's collation locale: the "C" locale (and
-- C.UTF-8) is bytewise; the probes below tell it from the usual others (which fold case
-- and skip punctuation), and any other locale takes the byte loop.
local function byte_loop_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local bytes_less = byte_loop_less
if 'B' < 'a' and '-' < '.' and 'a-b' < 'a.a' and '9' < 'A' and 'Z' < '_' and 'ab' < 'abc'
  and not ('a.a' < 'a-b') then
  bytes_less = function(a, b) return a < b end
end

-- Per shard, a cursor over its hosts in ready-set order: `due` ones (readiness <= now)
-- or open not-yet-due ones (gate <= now, among the first `scan`), read in chunks into
-- parallel arrays: readiness `sc`, host `nm`, host record `rc` (open ones only).
local function cursor(s, due)
  return {s = s, due = due, sc = {}, nm = {}, rc = {}, at = 1, offset = 0, done = false}
end
local function fill(c, want)
  use_shard(SHARD_KEYS, c.s)
  while c.at > #c.nm and not c.done do
    c.sc, c.nm, c.rc, c.at = {}, {}, {}, 1
    local chunk = want + 1 + math.floor(want / 8)  -- a margin over the share asked
    local got
    if c.due then
      got = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_arg, 'WITHSCORES',
                       'LIMIT', c.offset, chunk)
    else
      chunk = math.min(2 * want + 16, scan - c.offset)
      if chunk <= 0 then c.done = true; return end
      got = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_arg, '+inf', 'WITHSCORES',
                       'LIMIT', c.offset, chunk)
    end
    if #got < 2 * chunk then c.done = true end
    c.offset = c.offset + #got / 2
    local sc, nm = c.sc, c.nm
    if c.due then  -- host records read when leased
      for i = 1, #got, 2 do
        local j = (i + 1) / 2
        nm[j], sc[j] = got[i], num(got[i + 1])
      end
    elseif #got > 0 then
      local hosts = {}
      for i = 1, #got, 2 do hosts[#hosts + 1] = got[i] end
      local recs = bulk('HMGET', K_HOSTS, hosts, 1)
      for j, rec in ipairs(recs) do
        local h = unpack_host_rec(rec)
        -- open: gate passed, not blocked now (nor paused or full: host_ready)
        if h.gate <= now and not (h.blocked > now) and host_ready(h, -INF) then
          local m = #nm + 1
          sc[m], nm[m], c.rc[m] = num(got[2 * j]), hosts[j], rec
        end
      end
    end
  end
end
-- Up to `k` hosts over all shards, by (readiness, name): {readiness, host, rec, shard}.
-- The shards' cursors sit in a binary heap by their next host.
local function before(a, b)
  local x, y = a.sc[a.at], b.sc[b.at]
  return x < y or (x == y and bytes_less(a.nm[a.at], b.nm[b.at]))
end
local function sift_down(heap, i)
  local n = #heap
  while true do
    local l, m = 2 * i, i
    if l <= n and before(heap[l], heap[m]) then m = l end
    if l + 1 <= n and before(heap[l + 1], heap[m]) then m = l + 1 end
    if m == i then return end
    heap[i], heap[m] = heap[m], heap[i]
    i = m
  end
end
local function merge(due, k)
  local out = {}
  if k <= 0 then return out end
  -- each shard's share and a margin per chunk (a host's shard is a hash of its name)
  local per = math.ceil(1.1 * k / S)
  local heap = {}
  for s = 1, S do
    local c = cursor(s, due)
    fill(c, math.min(per, k))
    if c.nm[c.at] then heap[#heap + 1] = c end
  end
  for i = math.floor(#heap / 2), 1, -1 do sift_down(heap, i) end
  while #out < k and #heap > 0 do
    local c = heap[1]
    out[#out + 1] = {c.sc[c.at], c.nm[c.at], c.rc[c.at], c.s}
    c.at = c.at + 1
    if c.at > #c.nm and not c.done and #out < k then fill(c, math.min(per, k - #out)) end
    if not c.nm[c.at] then
      heap[1] = heap[#heap]
      heap[#heap] = nil
    end
    sift_down(heap, 1)
  end
  return out
end

-- The one host `only` (its shard is the call's only one), as merge would list it.
local function only_host()
  use_shard(SHARD_KEYS, 1)
  local score = redis.call('ZSCORE', K_READY, only)
  if not score or cap < 1 then return {}, {} end
  score = num(score)
  if score <= now then return {{score, only, nil, 1}}, {} end
  if k_ahead < 1 then return {}, {} end
  local rec = redis.call('HGET', K_HOSTS, only)
  local h = unpack_host_rec(rec)
  if h.gate <= now and not (h.blocked > now) and host_ready(h, -INF) then
    return {}, {{score, only, rec, 1}}
  end
  return {}, {}
end

local due, open
if only ~= '' then
  due, open = only_host()
else
  due, open = merge(true, cap), {}
  if k_ahead > 0 then open = merge(false, math.min(k_ahead, cap - #due)) end
end

if mode == 'plan' then
  local a, b = {}, {}
  for _, e in ipairs(due) do a[#a + 1] = str(e[1]); a[#a + 1] = e[2]; a[#a + 1] = e[4] end
  for _, e in ipairs(open) do b[#b + 1] = str(e[1]); b[#b + 1] = e[2]; b[#b + 1] = e[4] end
  return {now_arg, a, b}
end
for _, e in ipairs(open) do due[#due + 1] = e end
local lam0_out = ''
if not isnan(log_lam0) then lam0_out = str(log_lam0) end
if #due == 0 then return {now_arg, str(deadline), lam0_out, lam0_count, '', ''} end

-- lease one URL of each chosen host; the writes shared by a shard go out in one call each
local by_shard = {}
for i, e in ipairs(due) do
  local s = e[4]
  by_shard[s] = by_shard[s] or {}
  table.insert(by_shard[s], i)
end
local grants, names = {}, {}
for s_idx, idx in pairs(by_shard) do
  use_shard(SHARD_KEYS, s_idx)
  local unread = {}
  for _, i in ipairs(idx) do
    if not due[i][3] then unread[#unread + 1] = due[i][2] end
  end
  if #unread > 0 then
    local recs = bulk('HMGET', K_HOSTS, unread, 1)
    local k = 0
    for _, i in ipairs(idx) do
      if not due[i][3] then k = k + 1; due[i][3] = recs[k] end
    end
  end
  local seq0 = redis.call('HINCRBY', K_META, 'lseq', #idx) - #idx
  local host_recs, ready, gone, leases, deadlines = {}, {}, {}, {}, {}
  local min_revisit = ctl().min_revisit
  -- what every lease record of this call starts with (pack_lease, whole)
  local lease_head = struct.pack(LEASE, ACTIVE, deadline, now) .. nonce .. ' '
  for j, i in ipairs(idx) do
    local e = due[i]
    local host = e[2]
    local h = unpack_host_rec(e[3])
    local q = K_QUEUE .. host
    -- paused, full or blocked since it was listed (another call, an operator): skipped;
    -- otherwise its queue's head is taken out (put back below when held back)
    local ukey = nil
    if host_ready(h, -INF) and not (h.blocked > now) then
      ukey = redis.call('ZPOPMIN', q)[1]
    end
    if ukey then
      -- only `due`, `last`, `refetch` are read and `due` or `lease` written: they are read
      -- and written in place in the stored entry (lib.lua entry_parts), not unpacked
      local ukeys = K_URLS .. host
      local s = redis.call('HGET', ukeys, ukey)
      local times_at, due_at, counts_at, tail_at = entry_parts(s)
      local url_due = struct.unpack('<d', s, due_at)
      local last, floor = NAN, -INF
      if times_at then last = struct.unpack('<d', s, times_at) end
      if tail_at then
        floor = struct.unpack('<d', s, tail_at + 8)  -- refetch after (URL_CTL)
        if isnan(floor) then floor = -INF end
      end
      if min_revisit > 0 and not isnan(last) then floor = math.max(floor, last + min_revisit) end
      if floor > now then
        -- held back (minimum revisit, refetch_after): queued again at that time
        url_due = math.max(url_due, floor)
        redis.call('HSET', ukeys, ukey, string.sub(s, 1, due_at - 1)
          .. struct.pack('<d', url_due) .. string.sub(s, due_at + 8))
        redis.call('ZADD', q, url_due, ukey)
      else
        local opened = h.gate
        if not isnan(h.blocked) then opened = math.max(opened, h.blocked) end
        local gated = 0  -- held by politeness or a block
        if url_due <= now and opened > url_due and now - opened <= BOUND_SLACK * h.delay then
          gated = 1
        end
        local was_ready = math.max(url_due, opened)
        h.gate = now + h.delay
        h.flight = h.flight + 1
        local seq = seq0 + j
        local seq_s = string.format('%d', seq)  -- (a number argument costs a %.17g)
        -- the counts with the lease seq (their last field) set; a queued URL's is 0
        local counts, entry
        if counts_at then
          counts = string.sub(s, counts_at, counts_at + 23) .. struct.pack('<I4', seq)
          entry = string.sub(s, 1, counts_at - 1) .. counts .. string.sub(s, counts_at + 28)
        else
          counts = COUNTS_HEAD_ZERO .. struct.pack('<I4', seq)
          entry = string.char(string.byte(s, 1) + 2) .. string.sub(s, 2, due_at + 7) .. counts
            .. string.sub(s, due_at + 8)
        end
        redis.call('HSET', ukeys, ukey, entry)
        leases[#leases + 1] = seq_s
        leases[#leases + 1] = lease_head .. host .. ' ' .. ukey
        deadlines[#deadlines + 1] = deadline_s
        deadlines[#deadlines + 1] = seq_s
        -- the record's first URL_SIZE bytes (as unpack_entry would give them), then GRANT
        local times = NAN_TIMES
        if times_at then times = string.sub(s, times_at, times_at + 23) end
        grants[i] = string.sub(s, 2, ENTRY_HEAD - 1) .. times .. string.sub(s, due_at, due_at + 7)
          .. counts .. struct.pack(GRANT, was_ready, h.mean, seq, s_idx, #host, #ukey, gated)
        names[i] = host .. ukey
        host_recs[#host_recs + 1] = host
        host_recs[#host_recs + 1] = pack_host(h)
      end
    end
    place_host(host, h, ready, gone)
  end
  bulk('HSET', K_HOSTS, host_recs, 2)
  bulk('ZADD', K_READY, ready, 2)
  bulk('ZREM', K_READY, gone, 1)
  bulk('HSET', K_LEASES, leases, 2)
  bulk('ZADD', K_DEADLINES, deadlines, 2)
end
local given, given_names = {}, {}
for i = 1, #due do
  if grants[i] then
    given[#given + 1] = grants[i]
    given_names[#given_names + 1] = names[i]
  end
end
return {now_arg, str(deadline), lam0_out, lam0_count, table.concat(given),
        table.concat(given_names)}
