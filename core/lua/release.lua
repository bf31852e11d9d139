-- Owner-checked release of one hold: GET + SET. On the owner's last hold the lock becomes free
-- (its value keeps the fence for FREE_TTL) and, if a waiter flagged it,
-- the releasing client's id is published on the release channel (the lock key + ':released', same
-- slot). Safe to replay (see lk_drop). (release_fast.lua, which read the value into v, and
-- lock_lib.lua first.)
-- KEYS[1] lock
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH, or SPUBLISH on a cluster), ARGV[3] message,
-- ARGV[4] hold id, ARGV[5] the acquisition's fence
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local s = v and lk_parse(v)
local holds = lk_drop(KEYS[1], s, ARGV[1], ARGV[4], ARGV[5])
if holds then
  return holds
end
if s.w == '1' then
  redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[3])
end
return 0
