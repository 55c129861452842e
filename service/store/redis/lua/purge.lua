-- Drop the URLs of one shard retired before a time (POST /urls/purge), with their
-- estimator state (in their entries); only hosts with retired URLs are read.
-- KEYS: the shard keys (lib.lua).  ARGV[1] retired before, Unix s.
-- Returns the dropped URLs as a flat list: host, URL key, host, URL key, …
local before = num(ARGV[1])
local hosts = redis.call('HGETALL', K_HOSTS)
local removed = 0
local out = {}
for i = 1, #hosts, 2 do
  local host = hosts[i]
  local h = unpack_host_rec(hosts[i + 1])
  if h.retired > 0 then
    local all = redis.call('HGETALL', K_URLS .. host)
    local drop = {}
    for j = 1, #all, 2 do
      local u = entry_url(all[j + 1])
      if u.retired < before then drop[#drop + 1] = all[j] end
    end
    if #drop > 0 then
      bulk('HDEL', K_URLS .. host, drop, 1)
      h.retired = h.retired - #drop
      put_host(host, h)
      removed = removed + #drop
      for _, ukey in ipairs(drop) do
        out[#out + 1] = host
        out[#out + 1] = ukey
      end
    end
  end
end
if removed > 0 then
  redis.call('HINCRBY', K_META, 'urls', -removed)
  redis.call('HINCRBY', K_META, 'retired', -removed)
end
return out
