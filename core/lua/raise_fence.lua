-- Redlock fence agreement: the node's fence for the name becomes at least ARGV[1]; if the token
-- holds the lock here, its fence becomes the acquisition's (so that re-entries on any node answer
-- it). A node without the key keeps the fence in a free lock value. (lib.lua and lock_lib.lua first.)
-- KEYS[1] (unused), KEYS[2] lock; ARGV[1] fence, ARGV[2] owner token, ARGV[3] lock TTL in ms
local f = tonumber(ARGV[1])
local s = lk_get(KEYS[2])
if not s then
  redis.call('SET', KEYS[2], lk_enc(lk_free(f, string.format('%.0f', f + 1))), 'PX', FREE_TTL)
elseif s.tok == ARGV[2] or s.f < f then
  s.f = f
  lk_keep(KEYS[2], s)
end
return 0
