-- A permit waiter gives up: remove it from the queue. If a release granted it a permit meanwhile
-- (handoff), the permit is handed on to the next waiter. In fair mode, if it was among the waiters
-- the free permits were meant for, name the waiter whose turn that permit is now, as a release
-- does. (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences, KEYS[4] fence counter, KEYS[5] queue,
-- KEYS[6] deadlines, KEYS[7] waiters
-- ARGV[1] waiter token, ARGV[2] publish command, ARGV[3] the waiter's limit, ARGV[4] the message
-- that wakes one waiter of a client (non-fair)
-- Returns 1 when a permit granted to the waiter was handed on, else 0.
local pos = redis.call('LPOS', KEYS[5], ARGV[1])
sem_unqueue(KEYS[5], KEYS[6], KEYS[7], ARGV[1])
local channel = KEYS[1] .. ':released'
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s then
  sem_drop(KEYS[1], KEYS[2], KEYS[3], {ARGV[1]})
  local now = sem_now()
  if tonumber(s) <= now then
    return 0
  end
  if sem_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[2], channel, now) == 0 then
    local nxt = sem_next_waiter(KEYS[5], KEYS[6], KEYS[7], now)
    redis.call(ARGV[2], channel, nxt and redis.sha1hex(nxt) or ARGV[4])
  end
  return 1
end
if not pos then
  return 0
end
local free = sem_room(KEYS[1], KEYS[2], ARGV[3])
if pos < free then
  local now = sem_now()
  if sem_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[2], channel, now) > 0 then
    return 0
  end
  local nxt = sem_next_waiter(KEYS[5], KEYS[6], KEYS[7], now)
  if nxt and free > 1 then
    nxt = redis.call('LINDEX', KEYS[5], free - 1) or nxt
  end
  if nxt then
    redis.call(ARGV[2], channel, redis.sha1hex(nxt))
  end
end
return 0
