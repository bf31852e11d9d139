-- The new leader records its value in its lock's value (so that the value lives, is renewed and
-- dies with the lock) and announces itself, if it still holds the lock. The lock's value is
-- TOKEN FENCE HOLDS W, a byte 2, BASE PREV ACQUIRED LABEL, NUL-separated
-- (core/internal/script/lua/lock.lua); the leader's value follows as a ninth field.
-- KEYS[1] lock
-- ARGV[1] owner token, ARGV[2] value, ARGV[3] fence, ARGV[4] publish command (PUBLISH or SPUBLISH)
-- Returns 1 when recorded, 0 when the token does not hold the lock.
local v = redis.call('GET', KEYS[1])
if not v or v:sub(1, #ARGV[1] + 1) ~= ARGV[1] .. '\0' then
  return 0
end
-- W (the fourth field) becomes at least 1, so that the leader's release, however it comes (Resign,
-- Close, WithMaxHold), is published on the release channel: observers listen there. (A 2, set by a
-- waiter of another kind of hold, also publishes there, and on that kind's channels: it stays.)
local head, w, tail = string.match(v, '^([^%z]*%z[^%z]*%z[^%z]*%z)([012])(\2[^%z]*%z[^%z]*%z[^%z]*%z[^%z]*)')
if w == '0' then
  w = '1'
end
redis.call('SET', KEYS[1], head .. w .. tail .. '\0' .. ARGV[2], 'KEEPTTL')
redis.call(ARGV[4], KEYS[1] .. ':leader', ARGV[3] .. ' ' .. ARGV[2])
return 1
