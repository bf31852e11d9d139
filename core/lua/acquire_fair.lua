-- Fair acquire: like acquire.lua, but a fresh acquisition is granted only to the head of a FIFO queue
-- of waiter tokens. Waiters that stop refreshing their deadline are dropped from the head.
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue (list of tokens), KEYS[4] deadlines (hash token -> ms)
-- ARGV[1] owner token, ARGV[2] TTL in ms, ARGV[3] waiter timeout in ms (0: try without joining the
-- queue), ARGV[4] hold id, ARGV[5] holder label
-- (lib.lua and lock_lib.lua first.)
-- Returns as acquire.lua; when the lock is free but another waiter is first, -1 - (time that waiter
-- may still take); {-1 - wait, 'behind'} when the caller just joined the queue behind another waiter.
local s = lk_get(KEYS[1])
if s and s.tok == ARGV[1] then
  return lk_reenter(KEYS[1], s, ARGV[4], ARGV[2])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local free = not s or s.tok == ''
local timeout = tonumber(ARGV[3])
-- enqueue puts the caller at the tail (or refreshes its deadline) and returns what acquire
-- answers: {-1 - wait, 'behind'} when it joined behind another waiter (a release meanwhile names
-- that one: the caller need not try again once subscribed), else -1 - wait.
local function enqueue(wait)
  if wait < 0 then wait = 0 end
  local behind = false
  if redis.call('HSET', KEYS[4], ARGV[1], now + timeout) == 1 then
    behind = redis.call('RPUSH', KEYS[3], ARGV[1]) > 1
  end
  -- The queue outlives its waiters: lengthen its TTL, never shorten it (other waiters may have
  -- longer timeouts). (PEXPIRE GT leaves a key without a TTL as it is: a key just created has none.)
  for i = 3, 4 do
    if redis.call('PEXPIRE', KEYS[i], timeout * 2, 'GT') == 0 then
      redis.call('PEXPIRE', KEYS[i], timeout * 2, 'NX')
    end
  end
  if behind then
    return {-1 - wait, 'behind'}
  end
  return -1 - wait
end
if not free then
  -- Taken: queue up; the queue's head matters only when the lock is free.
  if timeout <= 0 then
    return lk_busy(KEYS[1], s, '')
  end
  return enqueue(redis.call('PTTL', KEYS[1]))
end
local head = redis.call('LINDEX', KEYS[3], 0)
while head and head ~= ARGV[1] do
  local dl = tonumber(redis.call('HGET', KEYS[4], head) or '0')
  if dl >= now then break end
  redis.call('LPOP', KEYS[3])
  redis.call('HDEL', KEYS[4], head)
  head = redis.call('LINDEX', KEYS[3], 0)
end
if not head or head == ARGV[1] then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], head)
  end
  return lk_take(KEYS[1], s, ARGV[1], ARGV[4], ARGV[2], now * 1000, ARGV[5], '0')
end
if timeout <= 0 then
  return -1
end
return enqueue(tonumber(redis.call('HGET', KEYS[4], head) or '0') - now)
