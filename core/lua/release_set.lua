-- Owner-checked release that also stores a value (a result, a completion marker) atomically: the
-- value is written only if the token still holds the lock with this hold. Same slot as the lock.
-- Safe to replay. (lib.lua and lock_lib.lua first.)
-- KEYS[1] lock, KEYS[2] key to set
-- ARGV[1] owner token, ARGV[2] publish command, ARGV[3] value, ARGV[4] its TTL in ms, ARGV[5] message,
-- ARGV[6] hold id, ARGV[7] the acquisition's fence
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local s = lk_get(KEYS[1])
if s and s.tok == ARGV[1] and lk_has(s.holds, ARGV[6]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
local holds = lk_drop(KEYS[1], s, ARGV[1], ARGV[6], ARGV[7])
if holds then
  return holds
end
if s.w == '1' then
  redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[5])
end
return 0
