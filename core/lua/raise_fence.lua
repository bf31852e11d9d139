-- Redlock fence agreement: counter = max(counter, fence), and if the token holds the lock here, the
-- lock's recorded fence becomes the acquisition's (so that re-entries on any node answer it).
-- (lib.lua first.)
-- KEYS[1] fence counter, KEYS[2] lock hash; ARGV[1] fence, ARGV[2] owner token, ARGV[3] lock TTL in ms
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', counter_ttl(ARGV[3]))
end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  redis.call('HSET', KEYS[2], FENCE, ARGV[1])
end
return 0
