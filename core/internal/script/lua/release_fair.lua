-- Owner-checked release of a lock taken in fair mode, as release.lua, with direct handoff: the
-- owner's last hold hands the lock to the first live waiter of the queue (fair.lua, lk_give). With
-- no live waiter the lock becomes free, and an empty message wakes a waiter of each client when a
-- waiter flagged the lock. Safe to replay (lk_drop: a replay finds the lock handed on, with its
-- fence in the chain of owner releases).
--! keys: lock queue deadlines
--! args: token pub hold fence
-- Returns: -1 when the token does not hold the lock (nothing touched), -2 when the key is missing
-- (lk_drop), else the holds left.
--! include fair.lua
local s = lk_get(k_lock)
if s and s.tok == a_token and s.holds == a_hold then
  local w = q_first(k_queue, k_deadlines, true)
  if w then
    lk_give(k_lock, s, w, a_pub)
    return 0
  end
end
local holds = lk_drop(k_lock, s, a_token, a_hold, a_fence)
if holds then
  return holds
end
lk_tell(a_pub, k_lock, s.w, '')
return 0
