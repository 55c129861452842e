-- Prelude of every crawlsched script (prepended when the scripts are registered).
--
-- KEYS (built by service/store/redis/keys.py; all carry the shard's hash tag, so a
-- script touches one slot; lease.lua alone touches every shard of one node, see there):
--   KEYS[1]  meta        hash   counters of the shard: urls, expired, lseq
--   KEYS[2]  hosts       hash   host -> packed host record (HOST layout below)
--   KEYS[3]  ready       zset   host scored by readiness = max(earliest due, gate), Unix
--                        µs, a whole number (host_ready)
--   KEYS[4]  leases      hash   lease seq -> packed lease record (LEASE layout below)
--   KEYS[5]  deadlines   zset   the leases of one lease call in the shard, "<first seq>:<n>"
--                        (seqs first .. first + n − 1; a bare seq: that one lease),
--                        scored by their deadline, Unix µs, a whole number (qscore);
--                        a member outlives its leases' ends (settled, dropped): its
--                        expiry skips the leases no longer active
--   KEYS[6]  finished    zset   settled/expired lease seq scored by seq (history to trim)
--   KEYS[7]  queue:      prefix of "queue:<host>", zset url key scored by due time, Unix
--                        µs, a whole number (qscore below)
--   KEYS[8]  urls:       prefix of "urls:<host>",  hash url key -> stored URL entry: the
--                        URL record and its estimator state (layouts below)
--   KEYS[9]  spare       no key is read or written under it (it keeps the place of the
--                        optional keys after it)
--   KEYS[10] once:<digest>  string  optional, only for event batches under an idempotency
--                        key: this batch's answer in this shard (below)
-- The per-host keys are found while the script runs (which host is ready is the
-- script's own answer), so they are passed as prefixes; they share the shard's
-- hash tag and therefore the declared keys' slot.
--
-- Numbers come in as ARGV strings written by Python's repr (exact round trip) and go
-- out as strings written with %.17g (Lua numbers returned bare would be truncated).

local K_META, K_HOSTS, K_READY = KEYS[1], KEYS[2], KEYS[3]
local K_LEASES, K_DEADLINES, K_FINISHED = KEYS[4], KEYS[5], KEYS[6]
local K_QUEUE, K_URLS = KEYS[7], KEYS[8]
local K_ONCE = KEYS[10]
-- Scripts over several shards of one node (lease.lua) hold the keys of each shard, 9
-- in the order above, one after the other in `list`, and point the K_* names at shard
-- `i` (1-based) before touching it.
local function use_shard(list, i)
  local b = 9 * (i - 1)
  K_META, K_HOSTS, K_READY = list[b + 1], list[b + 2], list[b + 3]
  K_LEASES, K_DEADLINES, K_FINISHED = list[b + 4], list[b + 5], list[b + 6]
  K_QUEUE, K_URLS = list[b + 7], list[b + 8]
end

local INF = math.huge
local NAN = -(0 / 0)
local function isnan(x) return x ~= x end
local function num(s) return tonumber(s) end
local function str(x) return string.format('%.17g', x) end

-- A host queue's, a ready set's and a deadline set's score: a time (Unix s) in whole µs,
-- rounded up (never early).  A zset of up to zset-max-listpack-entries members is a listpack, which keeps
-- a whole number as an integer: placing a member compares it with the scores before it,
-- and a fractional score would be parsed as text at each comparison (the cost of a ZADD
-- into a queue of 100 URLs falls about fourfold).  Rounding keeps ties (a gate opening
-- at the instant a URL falls due) and keeps order; the embedded store keys its ready
-- sets the same way (service/store/base.py ready_score).
local function qscore(due) return math.ceil(due * 1000000) end
-- The highest score reached at `now` (Unix s): a member is due (a lease expired) when its
-- score is at most this; qscore_at gives it as text, a range bound (ZRANGEBYSCORE, ZCOUNT).
local function qscore_now(now) return now * 1000000 end
-- A score as a command argument: a whole number written as one ('%d'), which costs a
-- fraction of what the server's '%.17g' of a number argument costs (the doubles of µs
-- scores take glibc's multi-precision path); ±inf and NaN as '%.17g' writes them.
local function score_arg(x)
  if x < INF and x > -INF then return string.format('%d', x) end
  return str(x)
end
local function qscore_at(now) return str(qscore_now(now)) end

-- The time decisions are taken at (lease deadlines, lease reclaiming, politeness gates):
-- the API process's clock (service/clock.py WallMap) applied to this server's own TIME,
-- so that processes whose machines' clocks disagree decide on one time line.  `spec` is
-- "start speed epoch": clock time = start + speed × (wall − epoch), wall = TIME, Unix s;
-- speed 0 is a clock standing still at `start` (a fixed reading; TIME is not read).
-- Scripts replicate their effects, not themselves (the only mode since Redis 7.0, the
-- default since 5.0), so reading TIME before writing keeps replicas and the AOF exact.
local function clock_now(spec)
  local start, speed, epoch = string.match(spec, '^(%S+) (%S+) (%S+)$')
  start, speed, epoch = tonumber(start), tonumber(speed), tonumber(epoch)
  if speed == 0 then return start end
  local t = redis.call('TIME')
  return start + speed * ((tonumber(t[1]) - epoch) + tonumber(t[2]) / 1000000)
end

-- Exactly-once batches: KEYS[10], when given, holds the answer this batch got in this
-- shard, one status code (a digit) per event, written with the batch's effects and
-- expiring after the key's TTL.  A repeat finds it and answers the same, changing
-- nothing; a repeat after a failure half-way applies the shards that have no answer.
-- The answer a batch got here before, or nil.
local function once_replay()
  if not K_ONCE then return nil end
  local rec = redis.call('GET', K_ONCE)
  if not rec then return nil end
  local out = {}
  for i = 1, #rec do out[i] = string.byte(rec, i) - 48 end
  return out
end
-- Remember a batch's answer for `ttl_ms` wall ms (nothing without a key).
local function once_remember(out, ttl_ms)
  if K_ONCE then redis.call('SET', K_ONCE, table.concat(out), 'PX', ttl_ms) end
end

-- cmd key [flag] items...: in chunks (Lua's unpack takes a few thousand values at most)
-- of whole groups of `stride` items, each chunk with the optional `flag` (ZADD's 'LT');
-- returns the answers of all chunks, concatenated.
local function bulk(cmd, key, items, stride, flag)
  local out = {}
  local size = 512 * stride
  for i = 1, #items, size do
    local got
    if flag then
      got = redis.call(cmd, key, flag, unpack(items, i, math.min(i + size - 1, #items)))
    else
      got = redis.call(cmd, key, unpack(items, i, math.min(i + size - 1, #items)))
    end
    if type(got) == 'table' then
      for _, v in ipairs(got) do out[#out + 1] = v end
    end
  end
  return out
end

-- URL record: W, Δ, recall, ν, β, ι, Λ scored, registered, last crawl, last signal,
-- last click, due (doubles; NaN = none), then n since crawl, clicks, signals, crawls,
-- changes, fetch errors, lease seq (uint32; 0 = not leased).  124 bytes; then the
-- frontier controls' tail (URL_CTL): retired at (Unix s, NaN = not retired), refetch
-- after (Unix s, NaN = none), gone count (uint32: 404 counts 1, 410 2), retire reason
-- (byte: 0 none, 1 gone, 2 redirect, 3 done); 145 bytes in all.  This is the record as
-- the scripts see it (get_rec) and as get.lua and lease.lua answer it.
local URL_HEAD, URL_TIMES, URL_COUNTS = '<dddddddd', '<ddd', '<I4I4I4I4I4I4I4'
local URL_CTL, URL_SIZE, URL_FULL = '<ddI4B', 124, 145
-- 1-based byte position of the record's lease seq, for scripts that read only that
local URL_LEASE_AT = 121
local RETIRE_GONE, RETIRE_REDIRECT, RETIRE_DONE = 1, 2, 3
-- Stored URL entry, the value of urls:<host>: a form byte, the record without the parts
-- that hold only their defaults, then the URL's estimator state (below; none: nothing).
--   form bit 1: the times (last crawl, last signal, last click; record bytes 65-88) are
--     there, else all three are NaN; bit 2: the counts (n since crawl .. lease seq; bytes
--     97-124), else all 0; bit 4: the controls' tail (bytes 125-145), else the defaults
--     (not retired, no refetch_after, gone 0, reason 0);
--   entry = form, record bytes 1-64 (W .. registered), [65-88], 89-96 (due), [97-124],
--     [125-145], estimator state.
-- A URL registered with W and Δ given and not yet leased: 1 + 72 + 17 = 90 bytes (a
-- listpack-encoded host hash holds it when hash-max-listpack-value allows: docs/
-- operations.md, "Redis memory").
local ENTRY_HEAD = 66  -- first byte after the form byte and W .. registered
local NAN_TIMES = struct.pack(URL_TIMES, NAN, NAN, NAN)
local ZERO_COUNTS = string.rep('\0', 28)
local CTL_DEFAULT = struct.pack(URL_CTL, NAN, NAN, 0, 0)
-- The full record (145 bytes) and the estimator state ('' = none) of a stored entry.
local function unpack_entry(s)
  local form = string.byte(s, 1)
  if form == 0 then  -- the usual form of a URL not leased nor crawled yet
    return string.sub(s, 2, ENTRY_HEAD - 1) .. NAN_TIMES .. string.sub(s, ENTRY_HEAD,
      ENTRY_HEAD + 7) .. ZERO_COUNTS .. CTL_DEFAULT, string.sub(s, ENTRY_HEAD + 8)
  end
  local at = ENTRY_HEAD
  local times, counts, tail = NAN_TIMES, ZERO_COUNTS, CTL_DEFAULT
  if form % 2 == 1 then times = string.sub(s, at, at + 23); at = at + 24 end
  local due = string.sub(s, at, at + 7)
  at = at + 8
  if form % 4 >= 2 then counts = string.sub(s, at, at + 27); at = at + 28 end
  if form >= 4 then tail = string.sub(s, at, at + 20); at = at + 21 end
  return string.sub(s, 2, ENTRY_HEAD - 1) .. times .. due .. counts .. tail, string.sub(s, at)
end
-- Where a stored entry `s` holds its parts, as 1-based byte positions: the times, the due
-- time, the counts, the controls' tail (nil: the part is left out, its defaults hold).
-- For scripts that read or write a field or two in place (lease.lua).
local function entry_parts(s)
  local form = string.byte(s, 1)
  local at, times, counts, tail = ENTRY_HEAD, nil, nil, nil
  if form % 2 == 1 then times = at; at = at + 24 end
  local due = at
  at = at + 8
  if form % 4 >= 2 then counts = at; at = at + 28 end
  if form >= 4 then tail = at end
  return times, due, counts, tail
end
-- Whether a stored entry's URL was ever crawled (its last crawl time is not NaN).
local function entry_crawled(s)
  if string.byte(s, 1) % 2 == 0 then return false end  -- its times all NaN
  return not isnan((struct.unpack('<d', s, ENTRY_HEAD)))
end
-- The lease seq of a stored entry (0: not leased).
local function entry_lease(s)
  local _, _, counts = entry_parts(s)
  if not counts then return 0 end
  return (struct.unpack('<I4', s, counts + 24))
end
-- For snapshots: the due time (%.17g, Unix s) of the URL at the head of `host`'s queue
-- (`head`: ZRANGE 0 0), as its entry holds it (the score is rounded: qscore); '' when
-- the queue is empty.
local function head_due(host, head)
  if not head[1] then return '' end
  local s = redis.call('HGET', K_URLS .. host, head[1])
  local _, due_at = entry_parts(s)
  return string.format('%.17g', struct.unpack('<d', s, due_at))
end
-- A URL's full record and estimator state, or nil (unknown URL).
local function get_rec(host, ukey)
  local s = redis.call('HGET', K_URLS .. host, ukey)
  if not s then return nil end
  return unpack_entry(s)
end
-- A stored entry as a table of the record's fields, the estimator state as `est`.
local function entry_url(s)
  local form = string.byte(s, 1)
  local u = {}
  local at
  u.w, u.delta, u.recall, u.nu, u.beta, u.thr, u.slam, u.reg, at = struct.unpack(URL_HEAD, s, 2)
  if form % 2 == 1 then
    u.last, u.lsig, u.lclick, at = struct.unpack(URL_TIMES, s, at)
  else
    u.last, u.lsig, u.lclick = NAN, NAN, NAN
  end
  u.due, at = struct.unpack('<d', s, at)
  if form % 4 >= 2 then
    u.n, u.clicks, u.signals, u.crawls, u.changes, u.errors, u.lease, at =
      struct.unpack(URL_COUNTS, s, at)
  else
    u.n, u.clicks, u.signals, u.crawls, u.changes, u.errors, u.lease = 0, 0, 0, 0, 0, 0, 0
  end
  if form >= 4 then
    u.retired, u.refetch, u.gone, u.reason, at = struct.unpack(URL_CTL, s, at)
  else
    u.retired, u.refetch, u.gone, u.reason = NAN, NAN, 0, 0
  end
  u.est = string.sub(s, at)
  return u
end
local function get_url(host, ukey)
  local s = redis.call('HGET', K_URLS .. host, ukey)
  if not s then return nil end
  return entry_url(s)
end
-- The stored entry of a URL table (its `est`, '' when nil, the estimator state).
-- The stored entry of a URL's fields: `head` the record's first 64 bytes (W ..
-- registered, packed), the others as values, `est` the estimator state; each optional
-- part is left out when it holds its defaults (for a caller that wants no table:
-- apply_signal).
local function pack_fields(head, last, lsig, lclick, due, n, clicks, signals, crawls,
                           changes, errors, lease, retired, refetch, gone, reason, est)
  local form, times, counts, tail = 0, '', '', ''
  if not (isnan(last) and isnan(lsig) and isnan(lclick)) then
    form = 1
    times = struct.pack(URL_TIMES, last, lsig, lclick)
  end
  if n ~= 0 or clicks ~= 0 or signals ~= 0 or crawls ~= 0 or changes ~= 0 or errors ~= 0
    or lease ~= 0 then
    form = form + 2
    counts = struct.pack(URL_COUNTS, n, clicks, signals, crawls, changes, errors, lease)
  end
  if not (isnan(retired) and isnan(refetch) and gone == 0 and reason == 0) then
    form = form + 4
    tail = struct.pack(URL_CTL, retired, refetch, gone, reason)
  end
  return string.char(form) .. head .. times .. struct.pack('<d', due) .. counts .. tail .. est
end
local function pack_url(u)
  return pack_fields(struct.pack(URL_HEAD, u.w, u.delta, u.recall, u.nu, u.beta, u.thr,
    u.slam, u.reg), u.last, u.lsig, u.lclick, u.due, u.n, u.clicks, u.signals, u.crawls,
    u.changes, u.errors, u.lease, u.retired or NAN, u.refetch or NAN, u.gone or 0,
    u.reason or 0, u.est or '')
end

-- The store's frontier controls every script shares, as ControlRules set them (written
-- to each shard's meta hash by the store's prepare): the minimum revisit interval, s,
-- and the in-flight cap of a host given none.  Read once per shard per call.
local CTL_CACHE = {}
local function ctl()
  local c = CTL_CACHE[K_META]
  if not c then
    local got = redis.call('HMGET', K_META, 'min_revisit', 'max_in_flight')
    -- none written (a store given no rules): no minimum revisit, no in-flight cap
    c = {min_revisit = tonumber(got[1]) or 0, in_flight = tonumber(got[2]) or 1000000}
    CTL_CACHE[K_META] = c
  end
  return c
end
-- Earliest time a URL may be leased: its last fetch + the minimum revisit interval (when
-- that is positive), its refetch_after (Unix s; -INF: none).
local function floor_at(refetch, last)
  local f = -INF
  if refetch and not isnan(refetch) then f = refetch end
  local m = ctl().min_revisit
  if m > 0 and not isnan(last) then f = math.max(f, last + m) end
  return f
end
local function floor_of(u) return floor_at(u.refetch, u.last) end
-- Store a URL table, with its estimator state (`est`).
local function put_url(host, ukey, u)
  redis.call('HSET', K_URLS .. host, ukey, pack_url(u))
end

-- Estimator state of a URL (service/store/redis/records.py; MATH.md "Estimating
-- parameters"), at the end of its stored entry (above), and only what the URL has: a URL
-- with no label, no given value, not fixed, no event and no outcome has none ('').
--   flags, 1 byte: 1 click count, 2 signal count, 4 fixed, 8 a label was given, 16 W,
--     32 Δ, 64 recall, 128 ν given at registration;
--   then, when flagged and in this order: the click count (decayed mass, reference Unix s:
--     '<dd'), the signal count ('<dd'), W (1/s), Δ (1/s), recall, ν (1/s) ('<d' each),
--     the label's length L ('<H') and the label (L bytes, UTF-8);
--   the crawl outcomes, oldest first, '<fH' each (6 bytes): τ s since the previous fetch
--     as a 32-bit float, stored negative when the copy had changed; n, the signals
--     counted in that interval (capped at 65535).
-- At most 67 + L + 6·window bytes per URL: settle.lua keeps the last `window` outcomes.
-- The flags of the prior (4 .. 128) are those of its multiples of 4: flags % 4 are the
-- counts'.  A decayed count holds Σ exp(−(ref − t_k)/T) at ref, the latest event time.
local EST_CLICKS, EST_SIGNALS = 1, 2
local OUTCOME, OUTCOME_SIZE, MAX_OUTCOME_N = '<fH', 6, 65535
-- A state as stored: one that holds nothing (flags 0, no outcome) is none ('').
local function est_norm(e)
  if e == '\0' then return '' end
  return e
end
local function has(flags, bit) return math.floor(flags / bit) % 2 == 1 end
-- Byte position (1-based) of the first given value of a state with these flags.
local function est_prior_at(flags)
  return 2 + 16 * (flags % 2) + 16 * (math.floor(flags / 2) % 2)
end
-- Byte position (1-based) of the first outcome of a state ('' has none: 2).
local function est_outcomes_at(e)
  if e == '' then return 2 end
  local flags = string.byte(e, 1)
  local at = est_prior_at(flags)
  local given = math.floor(flags / 16)  -- the flags 16 .. 128: a value given each
  while given > 0 do
    at = at + 8 * (given % 2)
    given = math.floor(given / 2)
  end
  if has(flags, 8) then at = at + 2 + struct.unpack('<H', e, at) end
  return at
end
-- Fold one event at `t` (Unix s) into a decayed count (mass, ref), time constant
-- `decay` s: exactly scheduler_core/estimate/rates.py add_event (an event older than
-- ref adds its decayed weight and leaves ref where it is).
local function add_event(mass, ref, t, decay)
  if isnan(ref) then return 1.0, t end
  if t >= ref then return mass * math.exp(-(t - ref) / decay) + 1.0, t end
  return mass + math.exp(-(ref - t) / decay), ref
end
-- A state `e` with one event folded into its click (which = EST_CLICKS) or signal
-- (EST_SIGNALS) count.
local function est_add_event(e, which, t, decay)
  if e == '' then e = '\0' end
  local flags = string.byte(e, 1)
  local at = 2  -- where the count is (or goes)
  if which == EST_SIGNALS and has(flags, EST_CLICKS) then at = 18 end
  local mass, ref, rest = 0, NAN, at
  if has(flags, which) then
    mass, ref = struct.unpack('<dd', e, at)
    rest = at + 16
  else
    flags = flags + which
  end
  mass, ref = add_event(mass, ref, t, decay)
  return string.char(flags) .. string.sub(e, 2, at - 1) .. struct.pack('<dd', mass, ref)
    .. string.sub(e, rest)
end

-- Host record: crawl delay (s), gate (Unix s), log-mean estimate (NaN = none),
-- its observation count, Λ its thresholds were scored for (NaN = never); then the
-- frontier controls' tail (HOST_CTL): blocked until (Unix s, NaN = never blocked; kept
-- after it passed), consecutive failures (uint32), in-flight cap (uint16, 0 = the
-- store's default), leases out (uint32), paused (byte 0/1), block reason (byte: 0 none,
-- 1 back-off, 2 operator), retired URLs (uint32).  64 bytes; records written before the
-- tail existed are 40 bytes and read as having the defaults.
local HOST = '<ddddd'
local HOST_CTL, HOST_SIZE = '<dI4HI4BBI4', 40
local BLOCK_BACK_OFF, BLOCK_OPERATOR = 1, 2
local HOST_ALL = HOST .. string.sub(HOST_CTL, 2)  -- both parts, in one format
-- (one struct call and a table built whole: dispatch unpacks a record per lease)
-- The record's fields in HOST_ALL's order (a record of the earlier layout: the tail's
-- defaults), as values: for a caller that wants no table (lease.lua, one per lease).
local function host_fields(s)
  if #s > HOST_SIZE then return struct.unpack(HOST_ALL, s) end  -- (then the next position)
  local delay, gate, mean, count, scored = struct.unpack(HOST, s)
  return delay, gate, mean, count, scored, NAN, 0, 0, 0, 0, 0, 0
end
local function unpack_host_rec(s)
  local delay, gate, mean, count, scored, blocked, failures, cap, flight, paused, reason,
    retired = host_fields(s)
  return {delay = delay, gate = gate, mean = mean, count = count, scored = scored,
          blocked = blocked, failures = failures, cap = cap, flight = flight,
          paused = paused, reason = reason, retired = retired}
end
local function get_host(host)
  local s = redis.call('HGET', K_HOSTS, host)
  if not s then return nil end
  return unpack_host_rec(s)
end
local function pack_host(h)
  return struct.pack(HOST_ALL, h.delay, h.gate, h.mean, h.count, h.scored, h.blocked or NAN,
    h.failures or 0, h.cap or 0, h.flight or 0, h.paused or 0, h.reason or 0, h.retired or 0)
end
local function put_host(host, h)
  redis.call('HSET', K_HOSTS, host, pack_host(h))
end
-- A host's readiness from the queue score of its earliest due URL and its gate and
-- block (Unix s): the latest of the three as a score (qscore).
local function readiness(head, gate, blocked)
  local r = math.max(head, qscore(gate))
  if not isnan(blocked) then r = math.max(r, qscore(blocked)) end
  return r
end
-- When a host can next give out a URL whose queue score is `head` (qscore): its
-- readiness; nil while it is paused or has its cap of leases out.
local function host_ready(h, head)
  if h.paused == 1 then return nil end
  local cap = h.cap
  if cap == 0 then cap = ctl().in_flight end
  if h.flight >= cap then return nil end
  return readiness(head, h.gate, h.blocked)
end

-- Lease record: status (1 active, 2 expired, 3 settled), deadline (Unix s), issue time
-- (Unix s), then "<nonce> <host> <url key>" (none of them holds white space).  Records
-- written before the issue time was kept lack it (read as NaN: unknown).
local ACTIVE, EXPIRED, SETTLED = 1, 2, 3
local LEASE = '<Bdd'
local TEXT = '^(%S+) (%S+) (%S+)$'
-- A stored lease record as a table.
local function lease_of(s)
  local status, deadline, issued, rest = struct.unpack(LEASE, s)
  local nonce, host, ukey = string.match(string.sub(s, rest), TEXT)
  if not nonce then  -- the earlier layout: no issue time
    status, deadline, rest = struct.unpack('<Bd', s)
    issued = NAN
    nonce, host, ukey = string.match(string.sub(s, rest), TEXT)
  end
  return {status = status, deadline = deadline, issued = issued, nonce = nonce, host = host,
          ukey = ukey}
end
local function get_lease(seq)
  local s = redis.call('HGET', K_LEASES, seq)
  if not s then return nil end
  return lease_of(s)
end
local function pack_lease(l)
  return struct.pack(LEASE, l.status, l.deadline, l.issued) .. l.nonce .. ' ' .. l.host .. ' '
    .. l.ukey
end
local function put_lease(seq, l)
  redis.call('HSET', K_LEASES, seq, pack_lease(l))
end

-- Due time (MATH.md "Due time"; scheduler_core/due.py, which the contract tests
-- hold this to): t_last + ι − β·n, capped at t_last + cap; registration time if
-- never crawled; not before floor_at.  From the fields it depends on (due_time: of a URL
-- table).  value_due_at is the uncapped part, for a URL crawled before: at its last
-- signal (its last crawl without one) once a signal proves a change (β = ∞), never
-- when ι is ∞.
local function value_due_at(last, lsig, thr, beta, n)
  if thr == INF then return INF end
  if n > 0 and beta == INF then
    if isnan(lsig) then return last end
    return lsig
  end
  local shift = 0
  if n > 0 then shift = beta * n end
  return last + thr - shift
end
local function due_of(reg, last, lsig, thr, beta, n, refetch, cap)
  local due = reg
  if not isnan(last) then due = math.min(value_due_at(last, lsig, thr, beta, n), last + cap) end
  return math.max(due, floor_at(refetch, last))
end
local function due_time(u, cap)
  return due_of(u.reg, u.last, u.lsig, u.thr, u.beta, u.n, u.refetch, cap)
end

-- The score of the earliest due URL in `host`'s queue (qscore), nil when it is empty.
local function queue_head(host)
  local head = redis.call('ZRANGE', K_QUEUE .. host, 0, 0, 'WITHSCORES')
  return head[1] and num(head[2])
end
-- Note host `host` in `ready` (score, host pairs) at readiness `r`, or in `gone` when
-- `r` is nil: the caller writes both to the shard's ready set.
local function note_ready(host, r, ready, gone)
  if r then
    ready[#ready + 1] = score_arg(r)
    ready[#ready + 1] = host
  else
    gone[#gone + 1] = host
  end
end
-- Write what note_ready noted to the shard's ready set (ZADD with `flag`, when given).
local function write_ready(ready, gone, flag)
  bulk('ZADD', K_READY, ready, 2, flag)
  bulk('ZREM', K_READY, gone, 1)
end
-- Note host `host` (record `h`) by its queue head (place_host: a caller that holds the
-- record).
local function place_host(host, h, ready, gone)
  local head = queue_head(host)
  note_ready(host, head and h and host_ready(h, head), ready, gone)
end
-- Re-key `hosts` (a list) in the ready set by host_ready on their records and the
-- queue score `head(host)` gives (nil: empty queue); out when their queue is empty,
-- they are paused or full.  One HMGET, one ZADD (with `flag`, when given), one ZREM.
local function rekey(hosts, head, flag)
  if #hosts == 0 then return end
  local recs = bulk('HMGET', K_HOSTS, hosts, 1)
  local ready, gone = {}, {}
  for i, host in ipairs(hosts) do
    local at = recs[i] and head(host)
    note_ready(host, at and host_ready(unpack_host_rec(recs[i]), at), ready, gone)
  end
  write_ready(ready, gone, flag)
end

-- Re-key hosts by their queue heads; `touched` is a set (host -> true).
local function refresh_all(touched)
  local hosts = {}
  for host in pairs(touched) do hosts[#hosts + 1] = host end
  rekey(hosts, queue_head)
end

-- Re-key hosts whose queues only gained URLs or saw URLs move earlier since their
-- ready-set score was right: `earlier` maps each to the earliest due time it gained
-- (Unix s), and its readiness is the least of its score and host_ready at that time (a
-- queue head can only have moved to that time; the record's gate and block did not
-- change): ZADD LT; a host absent (its queue was empty) is added at that.  Hosts also
-- in `touched` are left to refresh_all, which reads their queue heads.
local function refresh_earlier(earlier, touched)
  local hosts = {}
  for host in pairs(earlier) do
    if not touched[host] then hosts[#hosts + 1] = host end
  end
  rekey(hosts, function(host) return qscore(earlier[host]) end, 'LT')
end

-- Set a URL's due time; an unleased URL moves in its host queue.  Returns true when
-- the host's readiness may have changed (the caller refreshes once per host).
local function move(host, ukey, u, new_due)
  u.due = new_due
  if u.lease == 0 and (not u.retired or isnan(u.retired)) then
    redis.call('ZADD', K_QUEUE .. host, score_arg(qscore(new_due)), ukey)
    return true
  end
  return false
end

-- Bring a retired URL back (registered again, or signalled), with its history: the
-- caller then moves it to its due time and writes it.
-- One retired URL fewer in the shard's and its host's counts (the host's record `h` when
-- the caller holds it and writes it, else read and written here).
local function count_unretired(host, h)
  redis.call('HINCRBY', K_META, 'retired', -1)
  local rec = h or get_host(host)
  if rec.retired > 0 then rec.retired = rec.retired - 1 end
  if not h then put_host(host, rec) end
end
local function unretire(host, u, h)
  if isnan(u.retired) then return end
  u.retired, u.reason, u.gone = NAN, 0, 0
  count_unretired(host, h)
end

-- A lease ends (expired or settled): remember it for duplicates.  The caller trims
-- the history once, with trim_history, after its batch.
local function finish(seq, l, status)
  l.status = status
  put_lease(seq, l)
  redis.call('ZADD', K_FINISHED, seq, seq)
end
local function trim_history(history)
  local excess = redis.call('ZCARD', K_FINISHED) - history
  if excess > 0 then
    local old = redis.call('ZPOPMIN', K_FINISHED, excess)
    local fields = {}
    for i = 1, #old, 2 do fields[#fields + 1] = old[i] end
    bulk('HDEL', K_LEASES, fields, 1)
  end
end

-- A lease of `host` ended (expired, settled, dropped): one lease fewer out.
local function lease_ended(host)
  local h = get_host(host)
  if h and h.flight > 0 then
    h.flight = h.flight - 1
    put_host(host, h)
  end
end

-- The lease seqs (text) of a deadline set's member: "<first>:<n>", or one bare seq.
local function lease_range(member)
  local first, n = string.match(member, '^(%d+):(%d+)$')
  if not first then return {member} end
  local seqs = {}
  for seq = tonumber(first), tonumber(first) + tonumber(n) - 1 do
    seqs[#seqs + 1] = string.format('%d', seq)
  end
  return seqs
end
-- Expired leases (deadline at or before `now`, Unix s) go back to their host queues
-- (at-least-once delivery); a lease of an expired member that is no longer active
-- (settled, or its URL dropped) is skipped.
local function reclaim(now, history)
  local expired = redis.call('ZRANGEBYSCORE', K_DEADLINES, '-inf', qscore_at(now))
  local touched, ended = {}, 0
  for _, member in ipairs(expired) do
    redis.call('ZREM', K_DEADLINES, member)
    local seqs = lease_range(member)
    local recs = bulk('HMGET', K_LEASES, seqs, 1)
    for i, seq in ipairs(seqs) do
      if recs[i] then
        local l = lease_of(recs[i])
        if l.status == ACTIVE then
          finish(seq, l, EXPIRED)
          ended = ended + 1
          local u = get_url(l.host, l.ukey)
          u.lease = 0
          put_url(l.host, l.ukey, u)
          if isnan(u.retired) then
            redis.call('ZADD', K_QUEUE .. l.host, score_arg(qscore(u.due)), l.ukey)
          end
          lease_ended(l.host)
          touched[l.host] = true
        end
      end
    end
  end
  if ended > 0 then redis.call('HINCRBY', K_META, 'expired', score_arg(ended)) end
  refresh_all(touched)
  if ended > 0 then trim_history(history) end
  return ended
end

-- Running mean of log values and their spread under the same weights
-- (scheduler_core/multipliers.py update_log_mean, the same operations in order).
local function fold_spread(mean, count, var, x, window, clip)
  count = count + 1
  if isnan(mean) then return x, count, var end
  local step = x - mean
  if count > window then step = math.max(-clip, math.min(clip, step)) end
  local w = math.min(count, window)
  return mean + step / w, count, (1.0 - 1.0 / w) * (var + step * step / w)
end

-- the same without the spread (a host's record keeps none)
local function fold(mean, count, x, window, clip)
  local m, c = fold_spread(mean, count, 0, x, window, clip)
  return m, c
end

-- Fold ln V of ungated dispatches (`free`, packed '<d' each) into the global λ₀ hash
-- `key` (mean = ln λ₀, count, var); returns the mean (NaN: none yet), count and var.
local function fold_lambda0(key, free, window, clip)
  local got = redis.call('HMGET', key, 'mean', 'count', 'var')
  local mean, count, var = num(got[1]) or NAN, num(got[2]) or 0, num(got[3]) or 0
  for at = 1, #free, 8 do
    mean, count, var = fold_spread(mean, count, var, struct.unpack('<d', free, at), window, clip)
  end
  if #free > 0 then
    if isnan(mean) then
      redis.call('HSET', key, 'count', str(count))
    else
      redis.call('HSET', key, 'mean', str(mean), 'count', str(count), 'var', str(var))
    end
  end
  return mean, count, var
end

-- Fold observations into the hosts' log-mean estimates (λ_h) of the current shard:
-- `obs` is host, x, host, x, ... (x a number, ln V − ln λ₀), folded in that order.  One
-- HMGET and one HSET for all; only the mean and count of each record change (a host
-- not on record is skipped).
local HOST_MEAN_AT = 17  -- byte position of the host record's mean, its count next (HOST)
local function fold_hosts(obs, window, clip)
  local hosts, seen = {}, {}
  for i = 1, #obs, 2 do
    if not seen[obs[i]] then seen[obs[i]] = true; hosts[#hosts + 1] = obs[i] end
  end
  local recs = bulk('HMGET', K_HOSTS, hosts, 1)
  local state = {}
  for j, host in ipairs(hosts) do
    if recs[j] then
      local mean, count = struct.unpack('<dd', recs[j], HOST_MEAN_AT)
      state[host] = {mean, count, recs[j]}
    end
  end
  for i = 1, #obs, 2 do
    local st = state[obs[i]]
    if st then st[1], st[2] = fold(st[1], st[2], obs[i + 1], window, clip) end
  end
  local out = {}
  for _, host in ipairs(hosts) do
    local st = state[host]
    if st then
      out[#out + 1] = host
      local rec = st[3]
      out[#out + 1] = string.sub(rec, 1, HOST_MEAN_AT - 1) .. struct.pack('<dd', st[1], st[2])
        .. string.sub(rec, HOST_MEAN_AT + 16)
    end
  end
  bulk('HSET', K_HOSTS, out, 2)
end

-- One change-indicating signal at `t` (Unix s) of a URL: counted, folded into the
-- decayed signal count (time constant `decay` s); stale at or before last crawl +
-- `discard` s, otherwise it moves the due time (MATH.md "Due time", revisit cap `cap`
-- s) and, when its URL is queued, its host goes into `earlier` (refresh_earlier) when
-- the URL came back (unretired) or moved earlier, else into `touched` (refresh_all).
-- Returns 0 accepted, 1 unknown URL, 2 stale.  (signals.lua, fold.lua)
-- The entry's fields are read into locals and written with pack_fields, not through a
-- URL table (entry_url, pack_url): a signal is the commonest event.
local URL_BETA_AT, URL_REG_AT = 34, 58  -- entry bytes of β (ι next) and registered
local function apply_signal(host, ukey, t, discard, cap, decay, touched, earlier)
  local ukeys = K_URLS .. host
  local s = redis.call('HGET', ukeys, ukey)
  if not s then return 1 end
  local form, at = string.byte(s, 1), ENTRY_HEAD
  local last, lsig, lclick = NAN, NAN, NAN
  if form % 2 == 1 then last, lsig, lclick, at = struct.unpack(URL_TIMES, s, at) end
  local due
  due, at = struct.unpack('<d', s, at)
  local n, clicks, signals, crawls, changes, errors, lease = 0, 0, 0, 0, 0, 0, 0
  if form % 4 >= 2 then
    n, clicks, signals, crawls, changes, errors, lease, at = struct.unpack(URL_COUNTS, s, at)
  end
  local retired, refetch, gone, reason = NAN, NAN, 0, 0
  if form >= 4 then retired, refetch, gone, reason, at = struct.unpack(URL_CTL, s, at) end
  local est = est_add_event(string.sub(s, at), EST_SIGNALS, t, decay)
  signals = signals + 1
  local code = 2
  if isnan(last) or t > last + discard then
    if not isnan(last) then n = n + 1 end
    if isnan(lsig) or t > lsig then lsig = t end
    local back = not isnan(retired)  -- not in the queue until now
    if back then  -- a signal brings a retired URL back (unretire)
      retired, reason, gone = NAN, 0, 0
      count_unretired(host)
    end
    local beta, thr = struct.unpack('<dd', s, URL_BETA_AT)
    local reg = struct.unpack('<d', s, URL_REG_AT)
    local was = due
    due = due_of(reg, last, lsig, thr, beta, n, refetch, cap)
    if lease == 0 then  -- (move)
      redis.call('ZADD', K_QUEUE .. host, score_arg(qscore(due)), ukey)
      if back or due <= was then
        local e = earlier[host]
        if not e or due < e then earlier[host] = due end
      else
        touched[host] = true
      end
    end
    code = 0
  end
  redis.call('HSET', ukeys, ukey, pack_fields(string.sub(s, 2, ENTRY_HEAD - 1), last, lsig,
    lclick, due, n, clicks, signals, crawls, changes, errors, lease, retired, refetch, gone,
    reason, est))
  return code
end

-- One click at `t` (Unix s) of a URL: counted, folded into the decayed click count
-- (`decay` s).  Returns 0 accepted, 1 unknown URL.  (clicks.lua, fold.lua)
local function apply_click(host, ukey, t, decay)
  local ukeys = K_URLS .. host
  local s = redis.call('HGET', ukeys, ukey)
  if not s then return 1 end
  -- two fields change: rewritten in the stored entry (entry_parts), which then holds the
  -- times (the click's) and the counts (clicks > 0) whatever it held; a tail of defaults
  -- only is left out
  local times_at, due_at, counts_at, tail_at = entry_parts(s)
  local times = NAN_TIMES
  if times_at then times = string.sub(s, times_at, times_at + 23) end
  local last = struct.unpack('<d', times, 17)  -- the last click
  if isnan(last) or t > last then last = t end
  local counts = ZERO_COUNTS
  if counts_at then counts = string.sub(s, counts_at, counts_at + 27) end
  local clicks = struct.unpack('<I4', counts, 5) + 1
  local form, tail, est_at = 3, '', due_at + 8
  if counts_at then est_at = counts_at + 28 end
  if tail_at then
    est_at = tail_at + 21
    tail = string.sub(s, tail_at, est_at - 1)
    if tail == CTL_DEFAULT then tail = '' else form = 7 end
  end
  redis.call('HSET', ukeys, ukey, string.char(form) .. string.sub(s, 2, ENTRY_HEAD - 1)
    .. string.sub(times, 1, 16) .. struct.pack('<d', last) .. string.sub(s, due_at, due_at + 7)
    .. string.sub(counts, 1, 4) .. struct.pack('<I4', clicks) .. string.sub(counts, 9)
    .. tail .. est_add_event(string.sub(s, est_at), EST_CLICKS, t, decay))
  return 0
end
