-- Owner-checked remaining TTL.
-- KEYS[1] lock; ARGV[1] owner token
-- Returns the PTTL in ms, or -3 when the token does not hold the lock.
local v = redis.call('GET', KEYS[1])
if v and v:sub(1, #ARGV[1] + 1) == ARGV[1] .. '\0' then
  return redis.call('PTTL', KEYS[1])
end
return -3
