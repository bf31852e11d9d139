-- Fair permit acquisition: as sem_acquire.lua, but waiters queue in FIFO order (the design of
-- acquire_fair.lua): a caller gets a permit only when fewer live waiters are ahead of it than
-- permits are free. Waiters that stop refreshing their deadline are dropped from the head.
-- (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences, KEYS[4] fence counter, KEYS[5] queue (list),
-- KEYS[6] deadlines (hash token -> ms), KEYS[7] waiters (hash token -> grant details)
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] limit, ARGV[4] waiter timeout in ms (0: try without
-- joining the queue), ARGV[5] holder label ("HOST PID LABEL"), ARGV[6] this attempt's number
-- (epoch). A release grants its permit to the queue's head directly (sem_handoff).
-- Returns as sem_acquire.lua; when permits are free but other waiters are first, -1 - the time
-- the queue's head may still take.
local now = sem_now()
local f = sem_replay(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now)
if f then
  return f
end
sem_reclaim(KEYS[1], KEYS[2], KEYS[3], now)
local head = sem_next_waiter(KEYS[5], KEYS[6], KEYS[7], now)
local free = sem_room(KEYS[1], KEYS[2], ARGV[3])
if free > 0 then
  local pos = nil
  if head then
    pos = redis.call('LPOS', KEYS[5], ARGV[1])
  end
  local ahead = pos or redis.call('LLEN', KEYS[5])
  if ahead < free then
    if pos then
      sem_unqueue(KEYS[5], KEYS[6], KEYS[7], ARGV[1])
    end
    return sem_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], now, ARGV[5])
  end
end
local timeout = tonumber(ARGV[4])
if timeout <= 0 then
  return sem_busy(KEYS[1], now)
end
sem_register(KEYS[5], KEYS[6], KEYS[7], ARGV[1], now, timeout, ARGV[6], ARGV[2], ARGV[3], ARGV[5])
if free > 0 and head then
  local wait = tonumber(redis.call('HGET', KEYS[6], head) or '0') - now
  if wait < 0 then wait = 0 end
  return -1 - wait
end
return sem_busy(KEYS[1], now)
