-- Owner-checked release of a lock taken in fair mode, as release.lua, with direct handoff: the
-- owner's last hold hands the lock to the first live waiter of the queue (fq_give in fair_lib.lua:
-- its held value, and a grant message naming the waiter by the SHA-1 of its token, never the token
-- itself). With no live waiter the lock becomes free, and an empty message wakes a waiter of each
-- client when a waiter flagged the lock. Safe to replay (see lk_drop: a replay finds the lock
-- handed on, with its fence in the chain of owner releases). (lib.lua, lock_lib.lua and
-- fair_lib.lua first.)
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue (ZSET), KEYS[4] deadlines (HASH)
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH or SPUBLISH), ARGV[3] hold id,
-- ARGV[4] the acquisition's fence
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local s = lk_get(KEYS[1])
if s and s.tok == ARGV[1] and s.holds == ARGV[3] then
  local us, now = fq_now()
  local w = fq_pop(KEYS[3], KEYS[4], now)
  if w then
    fq_give(KEYS[1], s, w, us, ARGV[2])
    return 0
  end
end
local holds = lk_drop(KEYS[1], s, ARGV[1], ARGV[3], ARGV[4])
if holds then
  return holds
end
if s.w == '1' then
  redis.call(ARGV[2], KEYS[1] .. ':released', '')
end
return 0
