-- Owner-checked release that also stores a value (a result, a completion marker) atomically: the
-- value is written only if the token still holds the lock. Same slot as the lock. Safe to replay.
-- (lib.lua first.)
-- KEYS[1] lock hash, KEYS[2] key to set, KEYS[3] release receipt
-- ARGV[1] owner token, ARGV[2] publish command, ARGV[3] value, ARGV[4] its TTL in ms, ARGV[5] message,
-- ARGV[6] hold id
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
if redis.call('HEXISTS', KEYS[1], ARGV[1] .. '\0' .. ARGV[6]) == 1 then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
local holds = drop(KEYS[1], KEYS[3], ARGV[1], ARGV[6])
if holds then
  return holds
end
redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[5])
return 0
