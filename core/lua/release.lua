-- Owner-checked release. Decrements the owner's hold count; on the last hold deletes the lock and
-- publishes the releasing client's id on the release channel (the lock key + ':released', same slot).
-- KEYS[1] lock hash
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH, or SPUBLISH on a cluster), ARGV[3] client id
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local holds = redis.call('HGET', KEYS[1], ARGV[1])
if not holds then
  return -1
end
holds = tonumber(holds) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], holds)
  return holds
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[3])
return 0
