-- An operator's forced release (Client.ForceRelease): deletes the lock whoever holds it and wakes
-- the next waiter as a release does. It leaves no release receipt, so the holder's next renewal
-- reports the loss and its own release answers "not held". (lib.lua first.)
-- KEYS[1] lock hash, KEYS[2] fair queue, KEYS[3] fair-queue deadlines
-- ARGV[1] publish command (PUBLISH or SPUBLISH), ARGV[2] message for non-fair waiters
-- Returns 1 when a lock was deleted, 0 when there was none.
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
local nxt = next_waiter(KEYS[2], KEYS[3])
redis.call(ARGV[1], KEYS[1] .. ':released', nxt and redis.sha1hex(nxt) or ARGV[2])
return 1
