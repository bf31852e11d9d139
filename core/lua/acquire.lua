-- Acquire a lock, re-enter it, or report how long it stays taken. One round trip. (lib.lua first.)
-- KEYS[1] lock hash, KEYS[2] fence counter
-- ARGV[1] owner token, ARGV[2] TTL in milliseconds, ARGV[3] hold id, ARGV[4] holder label,
-- ARGV[5] optional fence floor
-- Returns: fence (integer > 0) on a fresh acquisition,
--          {fence, holds} when the owner re-entered (or a replay found this hold recorded),
--          -1 - pttl (integer < 0) when another owner holds the lock.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return take(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[4])
end
return reenter(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2]) or busy(KEYS[1])
