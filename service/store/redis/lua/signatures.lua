-- Content signatures (an ETag or a digest of the body, as the crawler sent them) of
-- URLs of one shard: store each new one and answer the one it replaces, or drop them
-- (the URLs were removed).
-- KEYS: the signature hash of each host of the call (keys.py ShardKeys.signatures:
-- URL key -> signature), all of one shard; 'drop' also serves any other per-host hash
-- keyed by URL key (the stale-signal counts of removed URLs, ShardKeys.stale).
-- ARGV[1] mode, 'swap' or 'drop'; 'swap': then triples (index of the host's key in
-- KEYS, URL key, signature); 'drop': then pairs (index of the host's key, URL key).
-- Answers (swap) the previous signature of each URL, false where none, in order;
-- (drop) nothing.
local out = {}
if ARGV[1] == 'drop' then
  for i = 2, #ARGV, 2 do redis.call('HDEL', KEYS[num(ARGV[i])], ARGV[i + 1]) end
  return out
end
for i = 2, #ARGV, 3 do
  local key = KEYS[num(ARGV[i])]
  out[#out + 1] = redis.call('HGET', key, ARGV[i + 1])
  redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2])
end
return out
