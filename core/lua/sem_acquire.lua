-- Take a permit of a semaphore, or queue for one and report how long until one may free up. One
-- round trip. (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences, KEYS[4] fence counter, KEYS[5] queue (list),
-- KEYS[6] deadlines (hash token -> ms), KEYS[7] waiters (hash token -> grant details)
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] limit, ARGV[4] holder label ("HOST PID LABEL"),
-- ARGV[5] waiter timeout in ms (0: try without queueing), ARGV[6] this attempt's number (epoch)
-- Returns the fence (> 0) when granted (also when replayed, or when a release granted the permit
-- to this waiter already), else -1 - the time until the earliest lease expires. Not fair: a caller
-- takes a free permit even when others are queued (a release hands its permit to the queue's head
-- directly, so that happens only with permits freed by expiry or by a raised limit).
local now = sem_now()
local f = sem_replay(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now)
if f then
  return f
end
sem_reclaim(KEYS[1], KEYS[2], KEYS[3], now)
if sem_room(KEYS[1], KEYS[2], ARGV[3]) > 0 then
  if redis.call('HEXISTS', KEYS[6], ARGV[1]) == 1 then
    sem_unqueue(KEYS[5], KEYS[6], KEYS[7], ARGV[1])
  end
  return sem_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], now, ARGV[4])
end
local timeout = tonumber(ARGV[5] or '0')
if timeout > 0 then
  sem_register(KEYS[5], KEYS[6], KEYS[7], ARGV[1], now, timeout, ARGV[6], ARGV[2], ARGV[3], ARGV[4])
end
return sem_busy(KEYS[1], now)
