-- Register or update URLs of one shard.
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] now, Unix s; ARGV[2] revisit cap, s; ARGV[3] default crawl delay, s; ARGV[4]
-- how long the answer is remembered under KEYS[10] (if given: lib.lua once_replay), wall
-- ms; ARGV[5] "1": leave URLs already registered as they are (only their host's crawl
-- delay is set, when given), "0": update them; then per URL: host, url key, and one
-- string: 9 packed doubles (W 1/s, Δ 1/s, recall,
-- ν 1/s, β s, ι s, Λ scored, known last crawl Unix s or NaN, crawl delay s or NaN)
-- followed by the prior as the estimator state holds it (lib.lua): a flags byte with
-- the prior's flags only (fixed, labelled, which of W, Δ, recall, ν were given), the
-- given values, the label's length and the label.  The prior replaces the stored one;
-- the decayed counts and outcomes of a known URL are kept; a URL with neither prior nor
-- history gets no estimator state.
-- A retired URL registered again (not left alone) comes back, with its history.
-- Returns per URL 1 (new) or 0 (updated, or left alone).
local seen = once_replay()
if seen then return seen end
local now, cap, default_delay = num(ARGV[1]), num(ARGV[2]), num(ARGV[3])
local keep_known = ARGV[5] == '1'
local out = {}
local hosts = {}  -- host -> record, written once at the end
local new_urls = 0
for i = 6, #ARGV, 3 do
  local host, ukey = ARGV[i], ARGV[i + 1]
  local w, delta, recall, nu, beta, thr, slam, last, delay, at =
    struct.unpack('<ddddddddd', ARGV[i + 2])
  local prior = string.sub(ARGV[i + 2], at)
  local h = hosts[host] or get_host(host)
  if not h then
    h = {delay = default_delay, gate = -INF, mean = NAN, count = 0, scored = NAN, blocked = NAN,
         failures = 0, cap = 0, flight = 0, paused = 0, reason = 0, retired = 0}
  end
  if not isnan(delay) then h.delay = delay end
  hosts[host] = h
  local u = get_url(host, ukey)
  if u and keep_known then
    out[#out + 1] = 0
  else
    -- the new prior between the stored counts and outcomes (a new URL has none)
    local e = u and u.est or ''
    local flags, events, outcomes = string.byte(prior, 1), '', ''
    if e ~= '' then
      local old = string.byte(e, 1)
      flags = flags + old % 4
      events = string.sub(e, 2, est_prior_at(old) - 1)
      outcomes = string.sub(e, est_outcomes_at(e))
    end
    local est = est_norm(string.char(flags) .. events .. string.sub(prior, 2) .. outcomes)
    if u then
      out[#out + 1] = 0
    else
      u = {reg = now, last = NAN, lsig = NAN, lclick = NAN, due = NAN, n = 0, clicks = 0,
           signals = 0, crawls = 0, changes = 0, errors = 0, lease = 0}
      new_urls = new_urls + 1
      out[#out + 1] = 1
    end
    if u.retired then unretire(host, u, h) end  -- registered again: back, with its history
    u.w, u.delta, u.recall, u.nu, u.beta, u.thr, u.slam = w, delta, recall, nu, beta, thr, slam
    u.est = est
    if not isnan(last) and (isnan(u.last) or last > u.last) then
      u.last, u.n = last, 0
    end
    move(host, ukey, u, due_time(u, cap))
    put_url(host, ukey, u)
  end
end
local touched = {}
for host, h in pairs(hosts) do
  put_host(host, h)
  touched[host] = true
end
if new_urls > 0 then redis.call('HINCRBY', K_META, 'urls', new_urls) end
refresh_all(touched)
once_remember(out, ARGV[4])
return out
