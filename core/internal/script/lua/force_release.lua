-- An operator's forced release (Client.ForceRelease): frees the name whoever holds it, in whatever
-- mode (lock.lua): its lock, every permit and every read and write hold, and wakes waiters: the lock's
-- first live fair waiter (named by the SHA-1 of its token: its next attempt takes the free lock)
-- or else one waiter of each client, and one permit (read-write) waiter per freed lease (at most
-- 1000). The lock keeps its fence and breaks its chain of owner releases (BASE = its fence + 1,
-- lock.lua), so the holder's next renewal reports the loss and its own release answers "not held".
--! keys: lock queue deadlines permits limits fences pqueue pdeadlines rw rwlimits rwfences rwqueue rwdeadlines
--! args: pub msg
-- queue, deadlines: the lock's fair queue; pqueue, pdeadlines: the semaphore's queue; rw...: the
-- read-write lock's leases and queue (sem.lua's keys). pub: PUBLISH or SPUBLISH; msg: the message
-- that wakes a waiter of each client.
-- Returns the number of holds deleted: 1 for the lock, plus one per live permit or read-write lease.
--! include lock.lua
--! include queue.lua
local _, ms = now()

-- free_leases deletes a semaphore's (or read-write lock's) leases and wakes its first live
-- waiters, one per freed lease, as releases do: each is named (a semaphore without live waiters
-- gets one client message per freed lease). Returns the number of live leases deleted.
local function free_leases(permits, limits, fences, queue, deadlines)
  local freed = redis.call('ZCOUNT', permits, '(' .. ms, '+inf')
  redis.call('DEL', permits, limits, fences)
  if freed == 0 then
    return 0
  end
  q_first(queue, deadlines, false) -- (drops the dead at the head)
  local first = redis.call('ZRANGE', queue, 0, math.min(freed, 1000) - 1)
  for i = 1, math.min(freed, 1000) do
    local msg = a_msg
    if #first > 0 then
      local w = first[i] and q_parse(first[i], 0)
      msg = w and redis.sha1hex(w.tok) or ''
    end
    redis.call(a_pub, permits .. ':released', msg)
  end
  return freed
end

local n = 0
local s = lk_get(k_lock)
if s and s.tok ~= '' then
  -- A lock's owner, or a family's mark (lock.lua): the name is free once its leases are deleted.
  redis.call('SET', k_lock, lk_enc(lk_free(s.f, int(s.f + 1))), 'PX', FREE_TTL)
  if s.tok:byte(1) ~= 1 then
    n = 1
  end
  local w = q_first(k_queue, k_deadlines, false)
  redis.call(a_pub, k_lock .. ':released', w and redis.sha1hex(w.tok) or a_msg)
  if s.w == '2' then
    redis.call(a_pub, k_permits .. ':released', a_msg)
    redis.call(a_pub, k_rw .. ':released', a_msg)
  end
end
n = n + free_leases(k_permits, k_limits, k_fences, k_pqueue, k_pdeadlines)
return n + free_leases(k_rw, k_rwlimits, k_rwfences, k_rwqueue, k_rwdeadlines)
