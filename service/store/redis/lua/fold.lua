-- Fold appended event entries of one shard (append.lua) into the URL records: signals
-- as signals.lua counts them (a stale one also in the URL's stale count), clicks as
-- clicks.lua; each entry is deleted from the
-- stream in the same atomic step, so an entry is applied exactly once: an id whose
-- entry is gone was folded before (by this or another consumer that died before its
-- XACK) and is skipped.  (A "last folded id" watermark would not do: consumers fold
-- claimed entries out of id order.)
-- KEYS[1..9] the shard keys (lib.lua); KEYS[10] the shard's event stream; KEYS[11] the
-- prefix of "stale:<host>" (keys.py ShardKeys.stale), hash url key -> stale signals.
-- ARGV[1] T_DELAY, s; ARGV[2] revisit cap, s; ARGV[3] decay time constant T, s;
-- ARGV[4..] the stream entry ids to fold.
-- Entries of settled crawl results (kind 'r', settle.lua) apply nothing: their URLs
-- are answered, for the folder to re-estimate with their new outcomes.
-- Returns {entries folded, signals accepted, signals of unknown URLs, stale signals,
-- clicks accepted, clicks of unknown URLs, {host, url key, ...} of every URL whose
-- history grew (accepted or stale), each once, {host, url key, ...} of the settled
-- results' URLs, each once}.
local K_STREAM, K_STALE = KEYS[10], KEYS[11]
local discard, cap, decay = num(ARGV[1]), num(ARGV[2]), num(ARGV[3])
local parts, sig, clk = 0, {0, 0, 0}, {0, 0}
local touched, earlier, seen, grew = {}, {}, {}, {}
local settled, seen_settled = {}, {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local entry = redis.call('XRANGE', K_STREAM, id, id)[1]
  if entry then
    local f = {}
    for j = 1, #entry[2], 2 do f[entry[2][j]] = entry[2][j + 1] end
    local nexthost, nextkey = string.gmatch(f.h, '%S+'), string.gmatch(f.u, '%S+')
    if f.k == 'r' then
      for host in nexthost do
        local ukey = nextkey()
        local name = host .. ' ' .. ukey
        if not seen_settled[name] then
          seen_settled[name] = true
          settled[#settled + 1] = host
          settled[#settled + 1] = ukey
        end
      end
    else
      for at = 1, #f.t, 8 do
        local t = struct.unpack('<d', f.t, at)
        local host, ukey = nexthost(), nextkey()
        local code
        if f.k == 's' then
          code = apply_signal(host, ukey, t, discard, cap, decay, touched, earlier)
          sig[code + 1] = sig[code + 1] + 1
          if code == 2 then redis.call('HINCRBY', K_STALE .. host, ukey, 1) end
        else
          code = apply_click(host, ukey, t, decay)
          clk[code + 1] = clk[code + 1] + 1
        end
        local name = host .. ' ' .. ukey
        if code ~= 1 and not seen[name] then
          seen[name] = true
          grew[#grew + 1] = host
          grew[#grew + 1] = ukey
        end
      end
    end
    redis.call('XDEL', K_STREAM, id)
    parts = parts + 1
  end
end
refresh_all(touched)
refresh_earlier(earlier, touched)
return {parts, sig[1], sig[2], sig[3], clk[1], clk[2], grew, settled}
