-- The new leader records its value in its lock hash (so that the value lives, is renewed and dies
-- with the lock) and announces itself, if it still holds the lock.
-- KEYS[1] lock hash
-- ARGV[1] owner token, ARGV[2] value, ARGV[3] fence, ARGV[4] publish command (PUBLISH or SPUBLISH)
-- Returns 1 when recorded, 0 when the token does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], '\0leader', ARGV[2])
redis.call(ARGV[4], KEYS[1] .. ':leader', ARGV[3] .. ' ' .. ARGV[2])
return 1
