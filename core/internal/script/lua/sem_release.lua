-- Owner-checked release of a permit. The freed permit goes straight to the live waiter at the head
-- of the queue (sem_handoff: its lease and fence are created here, and the message on the
-- semaphore's release channel, the permits key + ':released', names it and its fence, so that it
-- holds without another round trip). When no queued waiter can take it, one waiter is woken
-- instead (sem_wake). Safe to replay: the receipt remembers a release for 5 s.
--! keys: permits limits fences lock queue deadlines receipt
--! args: token pub msg fair
-- lock: the name's lock key, which holds the family's mark (sem.lua). receipt: named after the permit's fence (or its token, for a give-back whose fence is unknown).
-- fair: as sem_acquire's ('0', '1', '2').
-- Returns 0 when released, -1 when the token holds no live permit, or one whose family's mark is
-- gone from the lock key (nothing published).
--! include sem.lua
local s = redis.call('ZSCORE', k_permits, a_token)
if not s then
  if redis.call('EXISTS', k_receipt) == 1 then
    return 0
  end
  return -1
end
local own = redis.call('ZSCORE', k_limits, a_token)
sem_drop(k_permits, k_limits, k_fences, {a_token})
if not sem_marked(k_lock, k_permits) then
  return -1 -- the family's mark is gone: the permit was lost (sem.lua); the name is not ours to free
end
local _, ms = now()
if tonumber(s) <= ms then
  sem_reclaim(k_permits, k_limits, k_fences)
  sem_vacate(k_lock, k_permits, a_pub)
  return -1 -- expired: the permit was free already
end
redis.call('SET', k_receipt, '1', 'PX', '5000')
sem_reclaim(k_permits, k_limits, k_fences)
-- Strict FIFO ('2', read-write locks): every waiter is queued, and the handoff granted whoever
-- could go; nobody else may take the free room, so nobody is woken.
if sem_handoff(k_permits, k_limits, k_fences, k_lock, k_queue, k_deadlines, a_pub) == 0 then
  if a_fair ~= '2' then
    sem_wake(k_permits, k_limits, k_queue, k_deadlines, a_pub, a_fair == '1' and '' or a_msg, a_fair == '1', own)
  end
  sem_vacate(k_lock, k_permits, a_pub) -- the last lease: the name is free
end
return 0
