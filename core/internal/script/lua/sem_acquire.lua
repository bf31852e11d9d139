-- Take a permit of a semaphore (Permits), or queue for one and report how long until one may free
-- up. One round trip.
--! keys: permits limits fences lock queue deadlines
--! args: token ttl limit label timeout fair pub
-- timeout: the waiter's queue timeout in ms (0: try without queueing). fair: '1' grants only in
-- queue order (a caller gets a permit only when fewer live waiters are ahead of it than permits
-- are free); '0' takes a permit that is free when it asks, even if others are queued (a release
-- hands its permit to the queue's head directly, so that happens only with permits freed by expiry
-- or by a raised limit); '2' (read-write locks) is strict FIFO: a caller gets a permit only when no
-- live waiter is queued ahead of it, and its grant hands on to the waiters behind it that have room
-- too (readers behind a reader), as a release would (pub: PUBLISH or SPUBLISH).
-- lock: the name's lock key (one name, one lock: while another kind of hold has the name, nothing
-- is granted and the caller queues, flagging the name so that its release wakes the family; when
-- the key does not hold the family's mark, the family's leases are dropped first: sem_orphans).
-- Returns the fence (> 0) when granted (also when replayed, or when a release granted the permit
-- to this waiter already), -1 - the time until the earliest lease expires when refused, and
-- {-1 - that time, 'queued', EPOCH} when queued (EPOCH names the queueing in grants).
--! include sem.lua
local f = sem_held(k_permits, k_limits, k_fences, k_lock, a_token, a_ttl)
if f then
  return f
end
sem_reclaim(k_permits, k_limits, k_fences)
local m = q_member(a_ttl, a_timeout, a_token, a_limit, a_label)
local other, cur = sem_other(k_lock, k_permits)
if other then
  local busy = lk_busy(k_lock, other, a_timeout, '2')
  if tonumber(a_timeout) <= 0 then
    return busy
  end
  return {busy, 'queued', q_wait(k_queue, k_deadlines, m, tonumber(a_timeout))}
end
sem_orphans(k_lock, k_permits, k_limits, k_fences, cur)
local free = sem_room(k_permits, k_limits, a_limit)
if free > 0 then
  local ahead = 0
  if a_fair ~= '0' and q_first(k_queue, k_deadlines, false) then
    ahead = redis.call('ZRANK', k_queue, m) or redis.call('ZCARD', k_queue)
  end
  if a_fair == '2' then
    free = 1 -- strict FIFO: nobody live ahead (q_first dropped the dead at the head)
  end
  if ahead < free then
    q_leave(k_queue, k_deadlines, m)
    local f = sem_grant(k_permits, k_limits, k_fences, k_lock, a_token, a_ttl, a_limit, a_label)
    if a_fair == '2' then
      sem_handoff(k_permits, k_limits, k_fences, k_lock, k_queue, k_deadlines, a_pub)
    end
    return f
  end
end
local busy = sem_busy(k_permits)
if tonumber(a_timeout) <= 0 then
  return busy
end
return {busy, 'queued', q_wait(k_queue, k_deadlines, m, tonumber(a_timeout))}
