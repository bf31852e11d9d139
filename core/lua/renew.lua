-- Owner-checked renewal (also used by Extend): GET + PEXPIRE GT. Hold counts are left as they are,
-- and so is a TTL longer than the one asked for: another hold of the lock (a co-owner through
-- WithOwner, with a longer TTL) may rely on it.
-- KEYS[1] lock; ARGV[1] owner token, ARGV[2] TTL in ms
-- Returns 1 when renewed, 0 when the token does not hold the lock.
local v = redis.call('GET', KEYS[1])
if v and v:sub(1, #ARGV[1] + 1) == ARGV[1] .. '\0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return 1
end
return 0
