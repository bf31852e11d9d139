-- A fair waiter gives up: remove it from the queue. If it was first and the lock is free, tell the
-- next (by the SHA-1 of its token). (lib.lua and lock_lib.lua first.)
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue, KEYS[4] deadlines
-- ARGV[1] waiter token, ARGV[2] publish command
local head = redis.call('LINDEX', KEYS[3], 0)
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if head == ARGV[1] then
  local s = lk_get(KEYS[1])
  if not s or s.tok == '' then
    local nxt = redis.call('LINDEX', KEYS[3], 0)
    redis.call(ARGV[2], KEYS[1] .. ':released', nxt and redis.sha1hex(nxt) or '')
  end
end
return 0
