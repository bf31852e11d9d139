-- Fair acquire: like acquire.lua, but a fresh acquisition is granted only to the head of a FIFO queue
-- of waiter tokens. Waiters that stop refreshing their deadline are dropped from the head.
-- KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] queue (list of tokens), KEYS[4] deadlines (hash token -> ms)
-- ARGV[1] owner token, ARGV[2] TTL in ms, ARGV[3] waiter timeout in ms (0: try without joining the queue)
-- Returns as acquire.lua; when the lock is free but another waiter is first, -1 - (time that waiter may still take).
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
local holds = redis.call('HGET', KEYS[1], ARGV[1])
if holds then
  holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), holds}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('LINDEX', KEYS[3], 0)
while head do
  local dl = tonumber(redis.call('HGET', KEYS[4], head) or '0')
  if dl >= now then break end
  redis.call('LPOP', KEYS[3])
  redis.call('HDEL', KEYS[4], head)
  head = redis.call('LINDEX', KEYS[3], 0)
end
local free = redis.call('EXISTS', KEYS[1]) == 0
if free and (not head or head == ARGV[1]) then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], head)
  end
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return fence(KEYS[2], nil)
end
local timeout = tonumber(ARGV[3])
if timeout <= 0 then
  local p = redis.call('PTTL', KEYS[1])
  if p < 0 then p = 0 end
  return -1 - p
end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
redis.call('HSET', KEYS[4], ARGV[1], now + timeout)
redis.call('PEXPIRE', KEYS[3], timeout * 2)
redis.call('PEXPIRE', KEYS[4], timeout * 2)
local wait
if free then
  wait = tonumber(redis.call('HGET', KEYS[4], head) or '0') - now
else
  wait = redis.call('PTTL', KEYS[1])
end
if wait < 0 then wait = 0 end
return -1 - wait
