-- A permit waiter gives up: it leaves the queue. If a release granted it a permit meanwhile
-- (handoff), the permit is handed on to the next waiter. In fair mode, if it was among the waiters
-- the free permits were meant for, the waiter whose turn that permit is now is woken, as a release
-- does (sem_wake); if it was the head, the waiters behind it that have room are granted.
--! keys: permits limits fences lock queue deadlines
--! args: token pub ttl timeout limit label msg
-- ttl, timeout, limit, label: what the waiter queued with (its queue member); msg: the message that
-- wakes one waiter of a client (non-fair).
-- Returns 1 when a permit granted to the waiter was handed on, else 0.
--! include sem.lua
local m = q_member(a_ttl, a_timeout, a_token, a_limit, a_label)
local pos = redis.call('ZRANK', k_queue, m)
q_leave(k_queue, k_deadlines, m)
local s = redis.call('ZSCORE', k_permits, a_token)
if s then
  sem_drop(k_permits, k_limits, k_fences, {a_token})
  local _, ms = now()
  if tonumber(s) <= ms then
    return 0
  end
  sem_reclaim(k_permits, k_limits, k_fences)
  if sem_handoff(k_permits, k_limits, k_fences, k_lock, k_queue, k_deadlines, a_pub) == 0 then
    sem_wake(k_permits, k_limits, k_queue, k_deadlines, a_pub, a_msg, true, a_limit)
    sem_vacate(k_lock, k_permits, a_pub)
  end
  return 1
end
-- A waiter that leaves the head may unblock the waiters behind it (a writer ahead of readers, a
-- caller with a lower limit ahead of one with a higher): those with room are granted.
local room = sem_room(k_permits, k_limits, a_limit)
if pos and (pos == 0 or pos < room) then
  if sem_handoff(k_permits, k_limits, k_fences, k_lock, k_queue, k_deadlines, a_pub) == 0 and pos < room then
    sem_wake(k_permits, k_limits, k_queue, k_deadlines, a_pub, a_msg, true, a_limit)
  end
end
return 0
