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
local hosts = {}  -- host -> record, written once at the end
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
  local h = hosts[host] or get_host(host)
  hosts[host] = h
  if not (status == 429 or status == 0 or (status >= 500 and status <= 599)) then
    h.failures = 0
    return
  end
  h.failures = h.failures + 1
  local untl = fetched + back_off_s(host, h.failures, retry_after)
  if isnan(h.blocked) or untl > h.blocked then h.blocked, h.reason = untl, BLOCK_BACK_OFF end
end
local out = {}
local touched = {}
local grew_t, grew_h, grew_u = {}, {}, {}  -- the accepted results, for the stream
local settled, settled_active = {}, {}  -- (seq, seq) pairs for the history; active seqs
-- Append an outcome to the URL's state; the oldest beyond the window are dropped.
local function add_outcome(u, tau, n, changed)
  local e = u.est
  local at = est_outcomes_at(e)
  if e == '' then e = '\0' end
  if changed then tau = -tau end
  e = e .. struct.pack(OUTCOME, tau, math.min(n, MAX_OUTCOME_N))
  local excess = (#e - at + 1) / OUTCOME_SIZE - math.max(window, 0)
  if excess > 0 then
    e = string.sub(e, 1, at - 1) .. string.sub(e, at + excess * OUTCOME_SIZE)
  end
  u.est = est_norm(e)
end
for host, ukey, seq, nonce, fetched, ok, changed, status, retry_after, refetch, retire in
    string.gmatch(ARGV[6], '(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)') do
  local known = changed ~= '2'
  fetched, ok, changed = num(fetched), ok == '1', changed == '1'
  status, retry_after, refetch, retire = num(status), opt(retry_after), opt(refetch), num(retire)
  local l = get_lease(seq)
  -- the URL only once the lease is known to be its own (so in this shard)
  local u = l and l.nonce == nonce and l.host == host and l.ukey == ukey and get_url(host, ukey)
  if not l or l.nonce ~= nonce then
    out[#out + 1] = 4
  elseif l.host ~= host or l.ukey ~= ukey then
    out[#out + 1] = 2
  elseif l.status == SETTLED then
    out[#out + 1] = 3
  elseif not u or (l.status == EXPIRED and u.lease ~= 0) then
    out[#out + 1] = 2
  else
    if l.status == ACTIVE then
      settled_active[#settled_active + 1] = seq
      local h = hosts[host] or get_host(host)
      hosts[host] = h
      if h.flight > 0 then h.flight = h.flight - 1 end
    else
      redis.call('ZREM', K_QUEUE .. host, ukey)
    end
    l.status = SETTLED
    put_lease(seq, l)
    settled[#settled + 1] = seq
    settled[#settled + 1] = seq
    u.lease = 0
    host_answer(host, status, fetched, retry_after)
    if not isnan(refetch) then u.refetch = refetch end
    if status == 404 then
      u.gone = u.gone + 1
    elseif status == 410 then
      u.gone = u.gone + 2
    else
      u.gone = 0
    end
    if not isnan(u.retired) then
      -- retired while leased: stays out of the queue
    elseif ok then
      u.crawls = u.crawls + 1
      if changed then u.changes = u.changes + 1 end
      if known and not isnan(u.last) and fetched > u.last then
        add_outcome(u, fetched - u.last, u.n, changed)
      end
      if isnan(u.last) or fetched > u.last then
        u.last = fetched
        if not isnan(u.lsig) and u.lsig > fetched + discard then u.n = 1 else u.n = 0 end
      end
      move(host, ukey, u, due_time(u, cap))
    else
      u.errors = u.errors + 1
      move(host, ukey, u, math.max(u.due, fetched + retry, floor_of(u)))
    end
    if isnan(u.retired) and (retire ~= 0 or u.gone >= gone_after) then
      if retire == 0 then retire = RETIRE_GONE end
      redis.call('ZREM', K_QUEUE .. host, ukey)
      u.retired, u.reason = fetched, retire
      local h = hosts[host] or get_host(host)
      hosts[host] = h
      h.retired = h.retired + 1
      redis.call('HINCRBY', K_META, 'retired', 1)
    end
    put_url(host, ukey, u)
    touched[host] = true
    grew_t[#grew_t + 1] = struct.pack('<d', fetched)
    grew_h[#grew_h + 1] = host
    grew_u[#grew_u + 1] = ukey
    out[#out + 1] = 0
  end
end
for host, h in pairs(hosts) do put_host(host, h) end
bulk('ZREM', K_DEADLINES, settled_active, 1)
bulk('ZADD', K_FINISHED, settled, 2)
refresh_all(touched)
trim_history(history)
if #grew_h > 0 then
  redis.call('XADD', K_STREAM, '*', 'k', 'r', 't', table.concat(grew_t),
    'h', table.concat(grew_h, ' '), 'u', table.concat(grew_u, ' '))
end
once_remember(out, ARGV[7])
return out
