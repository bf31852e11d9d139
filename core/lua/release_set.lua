-- Owner-checked release that also stores a value (a result, a completion marker) atomically: the
-- value is written only if the token still holds the lock. Same slot as the lock.
-- KEYS[1] lock hash, KEYS[2] key to set
-- ARGV[1] owner token, ARGV[2] publish command, ARGV[3] value, ARGV[4] its TTL in ms, ARGV[5] client id
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local holds = redis.call('HGET', KEYS[1], ARGV[1])
if not holds then
  return -1
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
holds = tonumber(holds) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], holds)
  return holds
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[5])
return 0
