-- Owner-checked release of a lock taken in fair mode: as release.lua, but the message names the
-- live waiter at the head of the queue (by the SHA-1 of its token, never the token itself), so
-- that only its process wakes a waiter. Safe to replay. (lib.lua first.)
-- KEYS[1] lock hash, KEYS[2] fence counter (unused), KEYS[3] queue (list), KEYS[4] deadlines
-- (hash), KEYS[5] release receipt
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH or SPUBLISH), ARGV[3] hold id
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local holds = drop(KEYS[1], KEYS[5], ARGV[1], ARGV[3])
if holds then
  return holds
end
local nxt = next_waiter(KEYS[3], KEYS[4])
redis.call(ARGV[2], KEYS[1] .. ':released', nxt and redis.sha1hex(nxt) or '')
return 0
