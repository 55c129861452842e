-- Counts of one shard for /metrics, the hosts' part over one slice of the shard's hosts:
-- those HSCAN gives from `cursor` with COUNT `count` (the caller calls again from the
-- cursor answered until it is '0'; a host may come twice if the hash shrinks meanwhile).
-- A slice's work is bounded by `count` (about that many hosts, or all of them while the
-- hash is a listpack, itself bounded by hash-max-listpack-entries), not by the shard's
-- size.  Each call reclaims expired leases first and reads the shard's counters.  `now`
-- is read here, from the server's TIME through the caller's clock (lib.lua clock_now).
-- KEYS: the shard keys (lib.lua).
-- ARGV[1] the clock, "start speed epoch" (lib.lua clock_now); ARGV[2] lease history kept;
-- ARGV[3] k, hosts with the highest λ_h estimate to return (of the slice); ARGV[4]
-- cursor ('0' to start, the default); ARGV[5] count, hosts per slice (default 256).
-- Returns {urls (retired ones too), hosts, due backlog of the slice's hosts (neither
--          blocked nor paused), the slice's hosts' leases out, expired total,
--          {host, record, URLs, queued, due, earliest due or '', ...} top k of the slice,
--          retired URLs, the slice's hosts blocked or paused now, next cursor ('0': done)}.
local history, k = num(ARGV[2]), num(ARGV[3])
local cursor, count = ARGV[4] or '0', ARGV[5] or '256'
local now = clock_now(ARGV[1])
reclaim(now, history)
local got = redis.call('HSCAN', K_HOSTS, cursor, 'COUNT', count)
local all = got[2]
local backlog, blocked, out = 0, 0, 0
local ranked = {}
for i = 1, #all, 2 do
  local q = K_QUEUE .. all[i]
  local due = redis.call('ZCOUNT', q, '-inf', qscore_at(now))
  local h = unpack_host_rec(all[i + 1])
  out = out + h.flight
  if h.paused == 1 or h.blocked > now then
    blocked = blocked + 1
  else
    backlog = backlog + due
  end
  if k > 0 then
    local mean = select(3, struct.unpack(HOST, all[i + 1]))
    if isnan(mean) then mean = -INF end
    ranked[#ranked + 1] = {mean, all[i], all[i + 1], due}
  end
end
table.sort(ranked, function(a, b) return a[1] > b[1] end)
local top = {}
for j = 1, math.min(k, #ranked) do
  local host, q = ranked[j][2], K_QUEUE .. ranked[j][2]
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  for _, v in ipairs({host, ranked[j][3], redis.call('HLEN', K_URLS .. host),
                      redis.call('ZCARD', q), ranked[j][4], head_due(host, head)}) do
    top[#top + 1] = v
  end
end
return {num(redis.call('HGET', K_META, 'urls') or '0'), redis.call('HLEN', K_HOSTS), backlog,
        out, num(redis.call('HGET', K_META, 'expired') or '0'), top,
        num(redis.call('HGET', K_META, 'retired') or '0'), blocked, got[1]}
