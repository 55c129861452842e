-- What a rescoring pass reads of some hosts of one shard, as packed columns (read only).
-- KEYS: the shard keys (lib.lua).  ARGV: the hosts.
-- Returns per host, in ARGV's order: {rows, left out, url key, url key, ...}: rows is W,
-- Δ, recall, ν and the stored ι of each URL ever crawled (5 doubles, 40 bytes, in the
-- keys' order), taken from the stored entry as it is (record bytes 1-32 and 41-48:
-- lib.lua, "URL record"); left out counts the URLs never crawled, which are due at their
-- registration whatever their threshold (and get one when first crawled); a host with no
-- URLs gives {'', 0}.
local out = {}
for a = 1, #ARGV do
  local all = redis.call('HGETALL', K_URLS .. ARGV[a])
  local rows, one, never = {}, {'', 0}, 0
  for i = 1, #all, 2 do
    local s = all[i + 1]  -- the entry: a form byte, then record bytes 1-64 (W .. registered)
    if entry_crawled(s) then
      rows[#rows + 1] = string.sub(s, 2, 33) .. string.sub(s, 42, 49)
      one[#one + 1] = all[i]
    else
      never = never + 1
    end
  end
  one[1], one[2] = table.concat(rows), never
  out[a] = one
end
return out
