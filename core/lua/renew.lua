-- Owner-checked renewal (also used by Extend). Hold counts are left as they are, and so is a TTL
-- longer than the one asked for: another hold of the lock (a co-owner through WithOwner, with a
-- longer TTL) may rely on it. (lib.lua first.)
-- KEYS[1] lock hash; ARGV[1] owner token, ARGV[2] TTL in ms
-- Returns 1 when renewed, 0 when the token does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  extend(KEYS[1], ARGV[2])
  return 1
end
return 0
