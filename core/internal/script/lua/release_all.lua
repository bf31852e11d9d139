-- Release one hold of each lock of a set (LockSet.Release): release.lua's release for each key of
-- one slot, in one round trip. Safe to replay (lock.lua, lk_drop).
--! keys: locks...
--! args: token pub msg hold fences...
-- fences: each lock's acquisition fence, in the keys' order.
-- Returns the holds left per key, in order: -1 where the token does not hold that lock, -2 where
-- its key is missing (lk_drop).
--! include lock.lua
local left = {}
for i, key in ipairs(k_locks) do
  local s = lk_get(key)
  local holds = lk_drop(key, s, a_token, a_hold, a_fences[i])
  if not holds then
    lk_tell(a_pub, key, s.w, a_msg)
    holds = 0
  end
  left[i] = holds
end
return left
