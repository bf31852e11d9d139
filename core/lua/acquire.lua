-- Acquire a lock, re-enter it, or report how long it stays taken. One round trip.
-- KEYS[1] lock hash (owner token -> hold count), KEYS[2] fence counter
-- ARGV[1] owner token, ARGV[2] TTL in milliseconds, ARGV[3] optional fence floor (µs)
-- Returns: fence (integer > 0) on a fresh acquisition,
--          {fence, holds} when the owner re-entered,
--          -1 - pttl (integer < 0) when another owner holds the lock.
-- Fence: the counter + 1, but never below a clock (milliseconds × 1000), so that fences keep
-- increasing even if the counter is lost (restart without persistence, failover before replication):
-- no restart takes less than a millisecond. Millisecond steps let the counter win, and spare the
-- SET, for all but the first acquisition of a name in a millisecond. The clock is the server's, or
-- the floor the client passes (Redlock: one floor for every node, so that the nodes agree and no
-- write-back is needed).
local function fence(key, floorArg)
  local f = redis.call('INCR', key)
  local floor = tonumber(floorArg or '')
  if not floor then
    local t = redis.call('TIME')
    floor = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
  end
  if f < floor then
    redis.call('SET', key, string.format('%.0f', floor))
    return floor
  end
  return f
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return fence(KEYS[2], ARGV[3])
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
