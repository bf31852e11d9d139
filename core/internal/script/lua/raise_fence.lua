-- Redlock fence agreement: the node's fence for the name becomes at least fence; if the token holds
-- the lock here, its fence becomes the acquisition's (so that re-entries on any node answer it). A
-- node without the key keeps the fence in a free lock value.
--! keys: lock
--! args: fence token
--! include lock.lua
local f = tonumber(a_fence)
local s = lk_get(k_lock)
if not s then
  redis.call('SET', k_lock, lk_enc(lk_free(f, int(f + 1))), 'PX', FREE_TTL)
elseif s.tok == a_token or s.f < f then
  s.f = f
  lk_keep(k_lock, s)
end
return 0
