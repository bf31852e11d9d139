-- Take a permit of a semaphore, or report how long until one may free up. One round trip.
-- (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences, KEYS[4] fence counter
-- ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] limit, ARGV[4] holder label ("HOST PID LABEL")
-- Returns the fence (> 0) when granted (also when replayed), else -1 - the time until the earliest
-- lease expires.
local now = sem_now()
local f = sem_replay(KEYS[1], KEYS[3], ARGV[1], now)
if f then
  return f
end
sem_reclaim(KEYS[1], KEYS[2], KEYS[3], now)
if sem_room(KEYS[1], KEYS[2], ARGV[3]) > 0 then
  return sem_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], now, ARGV[4])
end
return sem_busy(KEYS[1], now)
