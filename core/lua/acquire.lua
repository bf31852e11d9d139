-- Acquire a lock, re-enter it, or report how long it stays taken. One round trip.
-- KEYS[1] lock hash (owner token -> hold count), KEYS[2] fence counter
-- ARGV[1] owner token, ARGV[2] TTL in milliseconds
-- Returns: fence (integer > 0) on a fresh acquisition,
--          {fence, holds} when the owner re-entered,
--          -1 - pttl (integer < 0) when another owner holds the lock.
-- Fence: the counter + 1, but never below the server clock in microseconds, so that fences keep
-- increasing even if the counter is lost (restart without persistence, failover before replication).
local function fence(key)
  local f = redis.call('INCR', key)
  local t = redis.call('TIME')
  local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if f < floor then
    redis.call('SET', key, string.format('%.0f', floor))
    return floor
  end
  return f
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return fence(KEYS[2])
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), holds}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = 0 end
return -1 - pttl
