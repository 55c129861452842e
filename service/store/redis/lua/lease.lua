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
-- length), then the host; the revisit cap, s (service/scheduler/scoring.py
-- due_by_revisit_cap).
-- A host's mean is ln(Λ_h / λ₀) (scheduler_core/multipliers.py): a gated dispatch adds
-- ln V − ln λ₀ (λ₀ after the fold), an ungated one 0.  With the multiplier key and λ₀
-- known, an ungated lease's own observation is folded into its host here, as it is
-- leased (its grant says so: gated 2), unless its URL is due by the revisit cap alone
-- (no observation); the caller sends only its ln V for λ₀.  A host's observations keep
-- their order: those of earlier calls come in this call's ARGV, folded first.
-- A lease is gated (held back by politeness) when its URL was due before the host's gate
-- opened and it goes out within BOUND_SLACK crawl delays of the opening.
local GRANT = '<ddI4HHHB'
local OBS = '<HBdH'  -- a dispatch observation, then its host (dispatch.py _OBS)
local BOUND_SLACK = 0.5  -- as scheduler_core.multipliers.BOUND_SLACK
local COUNTS_HEAD_ZERO = string.rep('\0', 24)  -- the counts but the lease seq, all 0
local now = clock_now(ARGV[1])
local now_arg = str(now)
local now_score = qscore_now(now)  -- ready-set scores are µs (lib.lua qscore)
local now_score_arg = qscore_at(now)
local mode, cap, k_ahead, ttl = ARGV[2], num(ARGV[3]), num(ARGV[4]), num(ARGV[5])
local nonce, history, scan, S = ARGV[6], num(ARGV[7]), num(ARGV[8]), num(ARGV[9])
local U = num(ARGV[10])
local deadline = now + ttl
local deadline_s = str(deadline)
local deadline_score = score_arg(qscore(deadline))  -- the deadline set's score (lib.lua)
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
local window, clip, max_revisit = NAN, NAN, INF
if K_MULT then
  window, clip, max_revisit = num(ARGV[A + 1]), num(ARGV[A + 2]), num(ARGV[A + 5])
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
-- parallel arrays: readiness `sc`, host `nm`, host record `rc` (open ones only); `hs`,
-- `hn` are the readiness and host at `at` (nil: none left).
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
      got = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_score_arg, 'WITHSCORES',
                       'LIMIT', score_arg(c.offset), score_arg(chunk))
    else
      chunk = math.min(2 * want + 16, scan - c.offset)
      if chunk <= 0 then c.done = true; break end
      got = redis.call('ZRANGEBYSCORE', K_READY, '(' .. now_score_arg, '+inf', 'WITHSCORES',
                       'LIMIT', score_arg(c.offset), score_arg(chunk))
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
  c.hs, c.hn = c.sc[c.at], c.nm[c.at]
end
-- The shards' cursors sit in a binary heap (heap[1..n]) by their next host: (readiness,
-- host name); no two shards list one host, so no two keys are equal.
local function sift_down(heap, i, n)
  local c = heap[i]
  local cs, cn = c.hs, c.hn
  while true do
    local l = 2 * i
    if l > n then break end
    local m, ms, mn = l, heap[l].hs, heap[l].hn
    if l < n then
      local r = heap[l + 1]
      local rs = r.hs
      if rs < ms or (rs == ms and bytes_less(r.hn, mn)) then m, ms, mn = l + 1, rs, r.hn end
    end
    if not (ms < cs or (ms == cs and bytes_less(mn, cn))) then break end
    heap[i] = heap[m]
    i = m
  end
  heap[i] = c
end
-- Up to `k` hosts over all shards, by (readiness, name), as parallel arrays: readiness,
-- host, host record (open ones only), shard.
local function merge(due, k)
  local o_sc, o_nm, o_rc, o_s = {}, {}, {}, {}
  if k <= 0 then return o_sc, o_nm, o_rc, o_s end
  -- each shard's share and a margin per chunk (a host's shard is a hash of its name)
  local per = math.ceil(1.1 * k / S)
  local heap, n = {}, 0
  for s = 1, S do
    local c = cursor(s, due)
    fill(c, math.min(per, k))
    if c.hn then n = n + 1; heap[n] = c end
  end
  for i = math.floor(n / 2), 1, -1 do sift_down(heap, i, n) end
  local m = 0
  while m < k and n > 0 do
    local c = heap[1]
    local at = c.at
    m = m + 1
    o_sc[m], o_nm[m], o_rc[m], o_s[m] = c.hs, c.hn, c.rc[at], c.s
    at = at + 1
    c.at = at
    if at > #c.nm and not c.done and m < k then
      fill(c, math.min(per, k - m))
    else
      c.hs, c.hn = c.sc[at], c.nm[at]
    end
    if not c.hn then
      heap[1] = heap[n]
      heap[n] = nil
      n = n - 1
    end
    if n > 0 then sift_down(heap, 1, n) end
  end
  return o_sc, o_nm, o_rc, o_s
end

-- The one host `only` (its shard is the call's only one), as merge would list it: due,
-- then open (readiness, host, record, shard arrays each).
local function only_host()
  local none = {{}, {}, {}, {}}
  use_shard(SHARD_KEYS, 1)
  local score = redis.call('ZSCORE', K_READY, only)
  if not score or cap < 1 then return none, none end
  score = num(score)
  if score <= now_score then return {{score}, {only}, {}, {1}}, none end
  if k_ahead < 1 then return none, none end
  local rec = redis.call('HGET', K_HOSTS, only)
  local h = unpack_host_rec(rec)
  if h.gate <= now and not (h.blocked > now) and host_ready(h, -INF) then
    return none, {{score}, {only}, {rec}, {1}}
  end
  return none, none
end

local due, open
if only ~= '' then
  due, open = only_host()
else
  due = {merge(true, cap)}
  open = {{}, {}, {}, {}}
  if k_ahead > 0 then open = {merge(false, math.min(k_ahead, cap - #due[2]))} end
end

if mode == 'plan' then
  local a, b = {}, {}
  for i = 1, #due[2] do a[#a + 1] = str(due[1][i]); a[#a + 1] = due[2][i]; a[#a + 1] = due[4][i] end
  for i = 1, #open[2] do b[#b + 1] = str(open[1][i]); b[#b + 1] = open[2][i]; b[#b + 1] = open[4][i] end
  return {now_arg, a, b}
end
-- the chosen hosts, due ones then open ones: host, record (nil: not read yet), shard
local c_nm, c_rc, c_s = due[2], due[3], due[4]
local n_due = #c_nm
for i = 1, #open[2] do
  c_nm[n_due + i], c_rc[n_due + i], c_s[n_due + i] = open[2][i], open[3][i], open[4][i]
end
local chosen = #c_nm
local lam0_out = ''
if not isnan(log_lam0) then lam0_out = str(log_lam0) end
if chosen == 0 then return {now_arg, deadline_s, lam0_out, lam0_count, '', ''} end

-- lease one URL of each chosen host; the writes shared by a shard go out in one call each
-- (the main chunk may hold 200 locals at most, lib.lua's included: a shard's leases are
-- a function of their own)
local by_shard = {}
for i = 1, chosen do
  local l = by_shard[c_s[i]]
  if not l then l = {}; by_shard[c_s[i]] = l end
  l[#l + 1] = i
end
-- an ungated lease's observation of its host, ln λ₀ − ln λ₀ (NaN: none here)
local X_UNGATED = log_lam0 - log_lam0
-- Whether a URL leased from stored entry `s` (entry_parts `times_at`, `counts_at`; last
-- fetch `last`) is due by the revisit cap alone: service/scheduler/scoring.py
-- due_by_revisit_cap (lib.lua value_due_at; ι and β are never −∞).
local function by_revisit_cap(s, times_at, counts_at, last)
  if isnan(last) then return false end
  local beta, thr = struct.unpack('<dd', s, URL_BETA_AT)
  local n = 0
  if counts_at then n = struct.unpack('<I4', s, counts_at) end
  local lsig = struct.unpack('<d', s, times_at + 8)
  return value_due_at(last, lsig, thr, beta, n) > last + max_revisit
end
local grants, names = {}, {}
local function lease_shard(s_idx, idx)
  -- the library functions of the loop below in registers (not looked up by name per lease)
  local ssub, spack, sunpack, rcall = string.sub, struct.pack, struct.unpack, redis.call
  local mmax, sformat = math.max, string.format
  use_shard(SHARD_KEYS, s_idx)
  local unread = {}
  for _, i in ipairs(idx) do
    if not c_rc[i] then unread[#unread + 1] = c_nm[i] end
  end
  if #unread > 0 then
    local recs = bulk('HMGET', K_HOSTS, unread, 1)
    local k = 0
    for _, i in ipairs(idx) do
      if not c_rc[i] then k = k + 1; c_rc[i] = recs[k] end
    end
  end
  local seq0 = rcall('HINCRBY', K_META, 'lseq', score_arg(#idx)) - #idx
  local host_recs, ready, gone, leases = {}, {}, {}, {}
  local rules = ctl()
  local min_revisit = rules.min_revisit
  -- what every lease record of this call starts with (pack_lease, whole)
  local lease_head = spack(LEASE, ACTIVE, deadline, now) .. nonce .. ' '
  for j, i in ipairs(idx) do
    local host, rec = c_nm[i], c_rc[i]
    local q = K_QUEUE .. host
    -- the host record's fields in locals (a table per lease costs more); only the gate,
    -- the estimate and the leases out change
    local whole = #rec > HOST_SIZE
    local delay, gate, mean, count, scored, blocked, failures, hcap, flight, paused, reason,
      retired = host_fields(rec)
    local rec_cap = hcap
    if hcap == 0 then hcap = rules.in_flight end
    local open = paused ~= 1 and flight < hcap  -- host_ready gives a time
    -- paused, full or blocked since it was listed (another call, an operator): skipped;
    -- otherwise its queue's head is taken out (put back below when held back)
    local ukey = nil
    if open and not (blocked > now) then
      ukey = rcall('ZPOPMIN', q)[1]
    end
    if ukey then
      -- only `due`, `last`, `refetch` are read and `due` or `lease` written: they are read
      -- and written in place in the stored entry (lib.lua entry_parts), not unpacked
      local ukeys = K_URLS .. host
      local s = rcall('HGET', ukeys, ukey)
      local times_at, due_at, counts_at, tail_at = entry_parts(s)
      local url_due = sunpack('<d', s, due_at)
      local last, floor = NAN, -INF
      if times_at then last = sunpack('<d', s, times_at) end
      if tail_at then
        floor = sunpack('<d', s, tail_at + 8)  -- refetch after (URL_CTL)
        if isnan(floor) then floor = -INF end
      end
      if min_revisit > 0 and not isnan(last) then floor = mmax(floor, last + min_revisit) end
      if floor > now then
        -- held back (minimum revisit, refetch_after): queued again at that time
        url_due = mmax(url_due, floor)
        rcall('HSET', ukeys, ukey, ssub(s, 1, due_at - 1)
          .. spack('<d', url_due) .. ssub(s, due_at + 8))
        rcall('ZADD', q, score_arg(qscore(url_due)), ukey)
      else
        local opened = gate
        if not isnan(blocked) then opened = mmax(opened, blocked) end
        local gated = 0  -- held by politeness or a block
        if url_due <= now and opened > url_due and now - opened <= BOUND_SLACK * delay then
          gated = 1
        end
        local was_ready = mmax(url_due, opened)
        local lease_mean = mean  -- the host's estimate as leased (the grant's)
        if gated == 0 and not isnan(X_UNGATED) and not by_revisit_cap(s, times_at, counts_at, last) then
          mean, count = fold(mean, count, X_UNGATED, window, clip)
          gated = 2
        end
        gate = now + delay
        flight = flight + 1
        open = flight < hcap
        local seq = seq0 + j
        local seq_s = sformat('%d', seq)  -- (a number argument costs a %.17g)
        -- the counts with the lease seq (their last field) set; a queued URL's is 0
        local seq_b = spack('<I4', seq)
        local entry
        if counts_at then
          entry = ssub(s, 1, counts_at + 23) .. seq_b .. ssub(s, counts_at + 28)
        else
          counts_at = due_at + 8
          entry = string.char(string.byte(s, 1) + 2) .. ssub(s, 2, due_at + 7)
            .. COUNTS_HEAD_ZERO .. seq_b .. ssub(s, counts_at)
        end
        rcall('HSET', ukeys, ukey, entry)
        leases[#leases + 1] = seq_s
        leases[#leases + 1] = lease_head .. host .. ' ' .. ukey
        -- the record's first URL_SIZE bytes (as unpack_entry would give them), then GRANT:
        -- the new entry's bytes 2 .. the counts' end, with the times between W .. registered
        -- and the due time where the entry leaves them out
        local grant = spack(GRANT, was_ready, lease_mean, seq, s_idx, #host, #ukey, gated)
        if times_at then
          grants[i] = ssub(entry, 2, counts_at + 27) .. grant
        else
          grants[i] = ssub(entry, 2, ENTRY_HEAD - 1) .. NAN_TIMES
            .. ssub(entry, ENTRY_HEAD, counts_at + 27) .. grant
        end
        names[i] = host .. ukey
        host_recs[#host_recs + 1] = host
        if whole then  -- (byte for byte what pack_host writes)
          host_recs[#host_recs + 1] = spack(HOST_ALL, delay, gate, mean, count, scored,
            blocked, failures, rec_cap, flight, paused, reason, retired)
        else
          host_recs[#host_recs + 1] = spack(HOST_ALL, delay, gate, mean, count, scored,
            NAN, 0, 0, flight, 0, 0, 0)
        end
      end
    end
    -- in the ready set at its new readiness, or out (lib.lua place_host on these fields).
    -- Readiness is the latest of the queue's head, the gate and the block: while a URL
    -- is due by the gate and block (as a backlog is), it is those two, and a member (no
    -- score: a score costs the server a '%.17g' and Lua a tonumber) tells; else the
    -- head is read.  A host paused or full is out whatever its queue holds.
    local at = nil
    if open then
      local bound = readiness(-INF, gate, blocked)
      local bound_arg = score_arg(bound)
      if rcall('ZRANGEBYSCORE', q, '-inf', bound_arg, 'LIMIT', '0', '1')[1] then
        at = bound_arg
      else
        local head = rcall('ZRANGE', q, '0', '0', 'WITHSCORES')
        if head[1] then at = score_arg(readiness(num(head[2]), gate, blocked)) end
      end
    end
    if at then
      ready[#ready + 1] = at
      ready[#ready + 1] = host
    else
      gone[#gone + 1] = host
    end
  end
  bulk('HSET', K_HOSTS, host_recs, 2)
  write_ready(ready, gone)
  bulk('HSET', K_LEASES, leases, 2)
  -- one deadline for the shard's leases of this call: their seqs are seq0 + 1 .. seq0 + #idx
  -- (a host that gave nothing leaves its seq unused)
  if #leases > 0 then
    rcall('ZADD', K_DEADLINES, deadline_score, sformat('%d:%d', seq0 + 1, #idx))
  end
end
for s_idx, idx in pairs(by_shard) do lease_shard(s_idx, idx) end
local given, given_names = {}, {}
for i = 1, chosen do
  if grants[i] then
    given[#given + 1] = grants[i]
    given_names[#given_names + 1] = names[i]
  end
end
return {now_arg, deadline_s, lam0_out, lam0_count, table.concat(given),
        table.concat(given_names)}
