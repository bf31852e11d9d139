-- A fair permit waiter gives up: remove it from the queue. If it was among the waiters the free
-- permits were meant for, name the waiter whose turn that permit is now, as a release does.
-- (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] queue, KEYS[4] deadlines
-- ARGV[1] waiter token, ARGV[2] publish command, ARGV[3] the waiter's limit
local pos = redis.call('LPOS', KEYS[3], ARGV[1])
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if not pos then
  return 0
end
local free = sem_room(KEYS[1], KEYS[2], ARGV[3])
if pos < free then
  local nxt = next_waiter(KEYS[3], KEYS[4])
  if nxt and free > 1 then
    nxt = redis.call('LINDEX', KEYS[3], free - 1) or nxt
  end
  if nxt then
    redis.call(ARGV[2], KEYS[1] .. ':released', redis.sha1hex(nxt))
  end
end
return 0
