-- Owner-checked remaining TTL.
-- KEYS[1] lock hash; ARGV[1] owner token
-- Returns the PTTL in ms, or -3 when the token does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PTTL', KEYS[1])
end
return -3
