-- Apply crawl results of one shard; each lease settles at most once.  A refreshed copy
-- resets τ (late signals after the fetch count once); a failed fetch keeps the copy and
-- comes back after the retry delay.  A refreshed copy whose `changed` is known, fetched
-- after a known previous fetch, appends its outcome (τ, n, changed) to the URL's
-- estimator state (lib.lua), which keeps the last `window` outcomes.
-- KEYS[1..9] the shard keys (lib.lua); KEYS[10] the shard's event stream (keys.py
-- ShardKeys.events); KEYS[11] optional: this batch's answer in this shard (lib.lua
-- once_replay, which reads it as K_ONCE).
-- ARGV[1] retry delay, s; ARGV[2] T_DELAY, s; ARGV[3] revisit cap, s; ARGV[4] lease
-- history kept; ARGV[5] outcomes kept per URL (window); ARGV[6] the results, "host
-- url-key lease-seq nonce fetched-at ok changed" each (fetched at: Unix s; ok: 0/1;
-- changed: 0 no, 1 yes, 2 unknown), separated by spaces; ARGV[7] how long the answer is
-- remembered under KEYS[11] (if given), wall ms; ARGV[8] back-off
-- base, s; ARGV[9] longest block, s; ARGV[10] back-off jitter (relative); ARGV[11]
-- gone count that retires a URL.  Each result also carries, after `changed`: the HTTP
-- status (0: network error), Retry-After s ('-': none), refetch_after Unix s ('-':
-- none), and a retire code (0 none, 2 redirect, 3 done).
-- Frontier controls (service/store/base.py ControlRules; the embedded store does the
-- same): 429, 5xx and 0 block the host for the Retry-After (capped) or an exponential
-- back-off with a deterministic jitter from redis.sha1hex("<host> <failures>"); any other
-- status forgets the host's failures; 404 adds 1 and 410 2 to the URL's gone count (any
-- other status resets it), which retires it at ARGV[11].
-- The accepted results' URLs go to the event stream, in the same atomic step, as one
-- entry like append.lua's (kind 'r', the fetch times, hosts and URL keys): fold.lua names
-- them to the folder, which re-estimates their parameters off the request path.
-- Returns per result 0 accepted, 2 stale (a lease of another URL, or of a URL dropped or
-- leased again since the lease expired), 3 duplicate, 4 unknown lease (never issued by
-- this shard, or forgotten).
local K_STREAM = KEYS[10]
K_ONCE = KEYS[11]
local seen = once_replay()
if seen then return seen end
local retry, discard, cap, history = num(ARGV[1]), num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local window = num(ARGV[5])
local base, max_block, jitter, gone_after = num(ARGV[8]), num(ARGV[9]), num(ARGV[10]),
  num(ARGV[11])
-- host -> record, of every host in the batch (read at the start; those of accepted
-- results written at the end)
local held = {}
local function opt(x) if x == '-' then return NAN end return num(x) end
-- service/store/base.py back_off_s, operation for operation.
local function back_off_s(host, failures, retry_after)
  if not isnan(retry_after) then return math.min(math.max(retry_after, 0), max_block) end
  local b = math.min(base * 2.0 ^ math.min(failures - 1, 60), max_block)
  local digest = redis.sha1hex(host .. ' ' .. string.format('%d', failures))
  local unit = tonumber(string.sub(digest, 1, 8), 16) / 4294967295
  return math.min(b * (1.0 + jitter * (2.0 * unit - 1.0)), max_block)
end
local function host_answer(host, status, fetched, retry_after)
  local h = held[host]
  if not (status == 429 or status == 0 or (status >= 500 and status <= 599)) then
    h.failures = 0
    return
  end
  h.failures = h.failures + 1
  local untl = fetched + back_off_s(host, h.failures, retry_after)
  if isnan(h.blocked) or untl > h.blocked then h.blocked, h.reason = untl, BLOCK_BACK_OFF end
end
local out = {}
local grew_t, grew_h, grew_u = {}, {}, {}  -- the accepted results, for the stream
local settled = {}  -- (seq, seq) pairs for the history
local lease_recs = {}  -- (seq, record) pairs of the settled leases, written at the end
-- A URL's estimator state `e` with one outcome appended; the oldest beyond the window
-- are dropped.
local function add_outcome(e, tau, n, changed)
  local at = est_outcomes_at(e)
  if e == '' then e = '\0' end
  if changed then tau = -tau end
  e = e .. struct.pack(OUTCOME, tau, math.min(n, MAX_OUTCOME_N))
  local excess = (#e - at + 1) / OUTCOME_SIZE - math.max(window, 0)
  if excess > 0 then
    e = string.sub(e, 1, at - 1) .. string.sub(e, at + excess * OUTCOME_SIZE)
  end
  return est_norm(e)
end
-- Settle one result of a lease known to be this URL's (stored lease record `lrec`,
-- status `status`) whose stored entry is `s`: the entry's fields are read into locals
-- and written with pack_fields, as apply_signal does (no URL table).
local function settle_one(host, ukey, seq, lrec, status, s, fetched, ok, changed, known,
                          code, retry_after, refetch_in, retire)
  local form, at = string.byte(s, 1), ENTRY_HEAD
  local last, lsig, lclick = NAN, NAN, NAN
  if form % 2 == 1 then last, lsig, lclick, at = struct.unpack(URL_TIMES, s, at) end
  local due
  due, at = struct.unpack('<d', s, at)
  local n, clicks, signals, crawls, changes, errors = 0, 0, 0, 0, 0, 0
  if form % 4 >= 2 then
    n, clicks, signals, crawls, changes, errors = struct.unpack(URL_COUNTS, s, at)
    at = at + 28
  end
  local retired, refetch, gone, reason = NAN, NAN, 0, 0
  if form >= 4 then retired, refetch, gone, reason, at = struct.unpack(URL_CTL, s, at) end
  local est = string.sub(s, at)
  local h = held[host]
  if status == ACTIVE then
    if h.flight > 0 then h.flight = h.flight - 1 end
  else
    redis.call('ZREM', K_QUEUE .. host, ukey)
  end
  lease_recs[#lease_recs + 1] = seq
  lease_recs[#lease_recs + 1] = string.char(SETTLED) .. string.sub(lrec, 2)
  settled[#settled + 1] = seq
  settled[#settled + 1] = seq
  host_answer(host, code, fetched, retry_after)
  if not isnan(refetch_in) then refetch = refetch_in end
  if code == 404 then
    gone = gone + 1
  elseif code == 410 then
    gone = gone + 2
  else
    gone = 0
  end
  -- retired now: out of the queue (a URL retired while leased stays out)
  local retiring = isnan(retired) and (retire ~= 0 or gone >= gone_after)
  local queued = isnan(retired) and not retiring
  if not isnan(retired) then
    -- retired while leased: its due time stays
  elseif ok then
    crawls = crawls + 1
    if changed then changes = changes + 1 end
    if known and not isnan(last) and fetched > last then
      est = add_outcome(est, fetched - last, n, changed)
    end
    if isnan(last) or fetched > last then
      last = fetched
      if not isnan(lsig) and lsig > fetched + discard then n = 1 else n = 0 end
    end
    local beta, thr = struct.unpack('<dd', s, URL_BETA_AT)
    local reg = struct.unpack('<d', s, URL_REG_AT)
    due = due_of(reg, last, lsig, thr, beta, n, refetch, cap)
  else
    errors = errors + 1
    due = math.max(due, fetched + retry, floor_at(refetch, last))
  end
  if queued then redis.call('ZADD', K_QUEUE .. host, score_arg(qscore(due)), ukey) end  -- (move)
  if retiring then
    if retire == 0 then retire = RETIRE_GONE end
    retired, reason = fetched, retire
    h.retired = h.retired + 1
    redis.call('HINCRBY', K_META, 'retired', 1)
  end
  redis.call('HSET', K_URLS .. host, ukey, pack_fields(string.sub(s, 2, ENTRY_HEAD - 1), last,
    lsig, lclick, due, n, clicks, signals, crawls, changes, errors, 0, retired, refetch, gone,
    reason, est))
end
-- The results, parsed first: their lease records and hosts' records are read in one
-- HMGET each.
local R, seqs, names, named = {}, {}, {}, {}
for host, ukey, seq, nonce, fetched, ok, changed, status, retry_after, refetch, retire in
    string.gmatch(ARGV[6], '(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)') do
  R[#R + 1] = {host, ukey, seq, nonce, fetched, ok, changed, status, retry_after, refetch,
               retire}
  seqs[#seqs + 1] = seq
  if not named[host] then named[host] = true; names[#names + 1] = host end
end
local lrecs = bulk('HMGET', K_LEASES, seqs, 1)
for i, rec in ipairs(bulk('HMGET', K_HOSTS, names, 1)) do
  if rec then held[names[i]] = unpack_host_rec(rec) end
end
local ended = {}  -- seqs settled by this batch
for i, r in ipairs(R) do
  local host, ukey, seq, nonce = r[1], r[2], r[3], r[4]
  local lrec = lrecs[i]
  local l = lrec and lease_of(lrec)
  if not l or l.nonce ~= nonce then
    out[i] = 4
  elseif l.host ~= host or l.ukey ~= ukey then
    out[i] = 2
  elseif l.status == SETTLED or ended[seq] then
    out[i] = 3
  else
    -- the URL only once the lease is known to be its own (so in this shard)
    local s = redis.call('HGET', K_URLS .. host, ukey)
    if not s or (l.status == EXPIRED and entry_lease(s) ~= 0) then
      out[i] = 2
    else
      local fetched, changed = num(r[5]), r[7]
      settle_one(host, ukey, seq, lrec, l.status, s, fetched, r[6] == '1', changed == '1',
        changed ~= '2', num(r[8]), opt(r[9]), opt(r[10]), num(r[11]))
      ended[seq] = true
      grew_t[#grew_t + 1] = struct.pack('<d', fetched)
      grew_h[#grew_h + 1] = host
      grew_u[#grew_u + 1] = ukey
      out[i] = 0
    end
  end
end
-- the accepted results' hosts: each record written once, and placed in the ready set
-- from what is held
local recs, placed, ready, gone = {}, {}, {}, {}
for _, host in ipairs(grew_h) do
  if not placed[host] then
    placed[host] = true
    recs[#recs + 1] = host
    recs[#recs + 1] = pack_host(held[host])
    place_host(host, held[host], ready, gone)
  end
end
bulk('HSET', K_HOSTS, recs, 2)
write_ready(ready, gone)
bulk('HSET', K_LEASES, lease_recs, 2)
bulk('ZADD', K_FINISHED, settled, 2)
trim_history(history)
if #grew_h > 0 then
  redis.call('XADD', K_STREAM, '*', 'k', 'r', 't', table.concat(grew_t),
    'h', table.concat(grew_h, ' '), 'u', table.concat(grew_u, ' '))
end
once_remember(out, ARGV[7])
return out
