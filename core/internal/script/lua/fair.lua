-- A fair lock's handoff (Fair): the lock and its queue (queue.lua).
--! include lock.lua
--! include queue.lua
--! include grant.lua

-- lk_give hands the lock to waiter w and tells it (grant.lua). s is the lock's value: held by the
-- owner whose last hold is being given up, or free; nil when the key is missing. The new value is
-- what lk_take would write for w: the next fence, w's hold (X) and label; the chain of owner
-- releases (BASE) goes on. The lease is w's TTL, but at most its queue TIMEOUT: a waiter that died
-- while queued keeps the lock no longer than it would have kept its place in the queue, and a live
-- one's watchdog lengthens the lease to its TTL within a third of that. Returns the fence.
local function lk_give(key, s, w, pub)
  local f, at = next_fence(s and s.f, nil)
  local px = tonumber(w.ttl)
  if w.timeout < px then
    px = w.timeout
  end
  redis.call('SET', key, lk_enc(lk_held(s, w.tok, w.x, w.label, f, at, s and s.w or '0')), 'PX', px)
  grant_tell(pub, key .. ':released', w, f)
  return f
end
