-- Apply crawl results of one shard; each lease settles at most once.  A refreshed copy
-- resets τ (late signals after the fetch count once); a failed fetch keeps the copy and
-- comes back after the retry delay.  A refreshed copy whose `changed` is known, fetched
-- after a known previous fetch, appends its outcome (τ, n, changed) to the URL's
-- estimator state (lib.lua), which keeps the last `window` outcomes.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] retry delay, s; ARGV[2] T_DELAY, s; ARGV[3] revisit cap, s; ARGV[4] lease
-- history kept; ARGV[5] outcomes kept per URL (window); ARGV[6] the results, "host
-- url-key lease-seq nonce fetched-at ok changed" each (fetched at: Unix s; ok: 0/1;
-- changed: 0 no, 1 yes, 2 unknown), separated by spaces; ARGV[7] how long the answer is
-- remembered under KEYS[10] (if given: lib.lua once_replay), wall ms.
-- Returns per result 0 accepted, 2 stale (a lease of another URL, or of a URL dropped or
-- leased again since the lease expired), 3 duplicate, 4 unknown lease (never issued by
-- this shard, or forgotten).
local seen = once_replay()
if seen then return seen end
local retry, discard, cap, history = num(ARGV[1]), num(ARGV[2]), num(ARGV[3]), num(ARGV[4])
local window = num(ARGV[5])
local out = {}
local touched = {}
local settled, settled_active = {}, {}  -- (seq, seq) pairs for the history; active seqs
-- Append an outcome to the URL's state; the oldest beyond the window are dropped.
local function add_outcome(host, ukey, tau, n, changed)
  local e = get_est(host, ukey)
  local at = est_outcomes_at(e)
  if e == '' then e = '\0' end
  if changed then tau = -tau end
  e = e .. struct.pack(OUTCOME, tau, math.min(n, MAX_OUTCOME_N))
  local excess = (#e - at + 1) / OUTCOME_SIZE - math.max(window, 0)
  if excess > 0 then
    e = string.sub(e, 1, at - 1) .. string.sub(e, at + excess * OUTCOME_SIZE)
  end
  put_est(host, ukey, e)
end
for host, ukey, seq, nonce, fetched, ok, changed in
    string.gmatch(ARGV[6], '(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)') do
  local known = changed ~= '2'
  fetched, ok, changed = num(fetched), ok == '1', changed == '1'
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
    else
      redis.call('ZREM', K_QUEUE .. host, ukey)
    end
    l.status = SETTLED
    put_lease(seq, l)
    settled[#settled + 1] = seq
    settled[#settled + 1] = seq
    u.lease = 0
    if ok then
      u.crawls = u.crawls + 1
      if changed then u.changes = u.changes + 1 end
      if known and not isnan(u.last) and fetched > u.last then
        add_outcome(host, ukey, fetched - u.last, u.n, changed)
      end
      if isnan(u.last) or fetched > u.last then
        u.last = fetched
        if not isnan(u.lsig) and u.lsig > fetched + discard then u.n = 1 else u.n = 0 end
      end
      move(host, ukey, u, due_time(u, cap))
    else
      u.errors = u.errors + 1
      move(host, ukey, u, math.max(u.due, fetched + retry))
    end
    put_url(host, ukey, u)
    touched[host] = true
    out[#out + 1] = 0
  end
end
bulk('ZREM', K_DEADLINES, settled_active, 1)
bulk('ZADD', K_FINISHED, settled, 2)
refresh_all(touched)
trim_history(history)
once_remember(out, ARGV[7])
return out
