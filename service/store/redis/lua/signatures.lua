-- Content signatures (an ETag or a digest of the body, as the crawler sent them) of
-- the URLs of one shard: store each new one and answer the one it replaces, or drop
-- them (the URLs were removed).
-- KEYS[1] the shard's signature hash (keys.py ShardKeys.signatures): URL -> signature.
-- ARGV[1] mode, 'swap' or 'drop'; 'swap': then pairs URL, signature; 'drop': then URLs.
-- Answers (swap) the previous signature of each URL, false where none, in order;
-- (drop) nothing.
local K_SIG = KEYS[1]
local items = {}
for i = 2, #ARGV do items[#items + 1] = ARGV[i] end
if ARGV[1] == 'drop' then
  bulk('HDEL', K_SIG, items, 1)
  return {}
end
local urls = {}
for i = 1, #items, 2 do urls[#urls + 1] = items[i] end
-- bulk skips nil answers of HMGET: read one chunk at a time in order instead
local out = {}
for i = 1, #urls, 512 do
  local got = redis.call('HMGET', K_SIG, unpack(urls, i, math.min(i + 511, #urls)))
  for j = 1, #got do out[#out + 1] = got[j] end
end
bulk('HSET', K_SIG, items, 2)
return out
