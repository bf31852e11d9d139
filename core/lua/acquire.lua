-- Acquire a lock, re-enter it, or report how long it stays taken. One round trip; GET + TIME + SET
-- when it is free. (acquire_fast.lua, which read the value into v, and lock_lib.lua first.)
-- KEYS[1] lock
-- ARGV[1] owner token, ARGV[2] TTL in milliseconds, ARGV[3] hold id, ARGV[4] holder label,
-- ARGV[5] fence floor ('' for none), ARGV[6] waiting: '' or 0 (TryAcquire), 1 (a waiting call:
-- flag a taken lock so that its release publishes), 2 (a call that waited: keep the flag when it
-- takes the lock, for the waiters behind it), ARGV[7] (a re-entry only, absent otherwise) the fence
-- of the acquisition re-entered, or 0 for any acquisition of the token (WithOwner)
-- Returns: fence (integer > 0) on a fresh acquisition,
--          {fence, holds} when the owner re-entered (or a replay found this hold recorded),
--          -1 - pttl (integer < 0) when another owner holds the lock,
--          {'nothold'} when a re-entry finds no acquisition of the token to enter (see lk_entry).
local s = v and lk_parse(v)
if ARGV[7] then
  return lk_entry(KEYS[1], s, ARGV[1], ARGV[3], ARGV[2], ARGV[7])
end
if not s or s.tok == '' then
  return lk_take(KEYS[1], s, ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[4], ARGV[6])
end
if s.tok == ARGV[1] then
  return lk_reenter(KEYS[1], s, ARGV[3], ARGV[2])
end
return lk_busy(KEYS[1], s, ARGV[6] or '')
