-- Owner-checked release of a lock taken in fair mode: as release.lua, but the message names the
-- live waiter at the head of the queue (by the SHA-1 of its token, never the token itself), so
-- that only its process wakes a waiter. Safe to replay. (lib.lua and lock_lib.lua first.)
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue (list), KEYS[4] deadlines (hash)
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH or SPUBLISH), ARGV[3] hold id,
-- ARGV[4] the acquisition's fence
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local s = lk_get(KEYS[1])
local holds = lk_drop(KEYS[1], s, ARGV[1], ARGV[3], ARGV[4])
if holds then
  return holds
end
local nxt = next_waiter(KEYS[3], KEYS[4])
if nxt or s.w == '1' then
  redis.call(ARGV[2], KEYS[1] .. ':released', nxt and redis.sha1hex(nxt) or '')
end
return 0
