-- Fair acquire (Fair): like acquire.lua, but waiting callers queue in Redis, first come first
-- served (queue.lua): a free lock goes to the first live waiter of the queue, and a release hands
-- the lock to it directly (fair.lua). A caller that finds the lock held queues up, or refreshes its
-- place if it is queued already.
--! keys: lock queue deadlines
--! args: token ttl timeout hold label pub entry?
-- timeout: the waiter's queue timeout in ms (0: try without joining the queue). pub: PUBLISH, or
-- SPUBLISH on a cluster. entry: as acquire.lua's (a re-entry neither takes the lock nor queues).
-- Returns as acquire.lua. A lock the caller's token holds with this hold already answers
-- {fence, holds} as a replay does: a release handed it to this waiter, whose grant message has not
-- arrived (or was lost); its TTL is lengthened to a full TTL from now, so that the caller may count
-- its lease from this attempt. A queued caller gets {-1 - wait, 'queued', EPOCH} (EPOCH names its
-- queueing in grants); wait is the holder's PTTL.
--! include fair.lua
local s = lk_live(k_lock, lk_get(k_lock))
if a_entry then
  return lk_entry(k_lock, s, a_token, a_hold, a_ttl, a_entry)
end
if s and s.tok == a_token then
  if lk_has(s.holds, a_hold) then
    redis.call('PEXPIRE', k_lock, a_ttl, 'GT')
    return {s.f, lk_count(s.holds)}
  end
  return lk_reenter(k_lock, s, a_hold, a_ttl)
end
local timeout = tonumber(a_timeout)
local m = q_member(a_ttl, a_timeout, a_token, a_hold, a_label)
local wait
if s and s.tok ~= '' then
  if timeout <= 0 then
    return lk_busy(k_lock, s, '')
  end
  if s.w == '0' then
    -- A holder that took the lock without Fair (or another kind of hold) releases without handing
    -- on: have its release publish, so that a waiter tries at once.
    s.w = '1'
    lk_keep(k_lock, s)
  end
  wait = redis.call('PTTL', k_lock)
else
  -- Free (a release that found no live waiter, an expiry, ForceRelease): the first live waiter
  -- takes it.
  local w = q_first(k_queue, k_deadlines, true)
  if not w or w.m == m then
    return lk_take(k_lock, s, a_token, a_hold, a_ttl, nil, a_label, '0')
  end
  lk_give(k_lock, s, w, a_pub)
  if w.tok == a_token then
    -- That waiter was another hold of the caller's token (WithOwner): the lock is the token's now.
    return lk_reenter(k_lock, lk_get(k_lock), a_hold, a_ttl)
  end
  wait = tonumber(w.ttl)
  if timeout <= 0 then
    return -1 - wait
  end
end
if wait < 0 then
  wait = 0
end
return {-1 - wait, 'queued', q_wait(k_queue, k_deadlines, m, timeout)}
