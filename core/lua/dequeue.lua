-- A fair waiter gives up: it leaves the queue. If a release handed it the lock meanwhile (direct
-- handoff; its grant message came too late, or was lost), the waiter gives that hold up; and a
-- lock left free goes to the next live waiter of the queue, as a release would hand it on (or, if
-- there is none, the release message wakes a waiter of each client when a waiter flagged the
-- lock). Safe to replay. (lib.lua, lock_lib.lua and fair_lib.lua first.)
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue (ZSET), KEYS[4] deadlines (HASH)
-- ARGV[1] waiter token, ARGV[2] publish command, ARGV[3] hold id, ARGV[4] the TTL in ms and
-- ARGV[5] the waiter timeout in ms it asked for, ARGV[6] its holder label (its queue member)
-- Returns 1 when the lock had been handed to the waiter, else 0.
local m = fq_member(ARGV[4], ARGV[5], ARGV[1], ARGV[3], ARGV[6])
redis.call('ZREM', KEYS[3], m)
redis.call('HDEL', KEYS[4], m)
local s = lk_get(KEYS[1])
local mine = s ~= nil and s.tok == ARGV[1] and lk_has(s.holds, ARGV[3])
if s and s.tok ~= '' and not mine then
  return 0 -- held by another owner (or other holds of the token): its release hands the lock on
end
if mine and s.holds ~= ARGV[3] then
  lk_drop(KEYS[1], s, ARGV[1], ARGV[3], '0') -- co-owners (WithOwner) hold it still
  return 1
end
local us, now = fq_now()
local w = fq_pop(KEYS[3], KEYS[4], now)
if w then
  fq_give(KEYS[1], s, w, us, ARGV[2])
elseif mine then
  lk_drop(KEYS[1], s, ARGV[1], ARGV[3], '0')
  if s.w == '1' then
    redis.call(ARGV[2], KEYS[1] .. ':released', '')
  end
end
return mine and 1 or 0
