-- An operator's forced release (Client.ForceRelease): frees the name's lock whoever holds it and
-- deletes every permit of its semaphore, and wakes waiters: the lock's first live fair waiter
-- (named by the SHA-1 of its token: its next attempt takes the free lock) or else one waiter of
-- each client, and one permit waiter per freed permit (at most 1000). The lock keeps its fence and
-- breaks its chain of owner releases (BASE = its fence + 1, lock.lua), so the holder's next renewal
-- reports the loss and its own release answers "not held".
--! keys: lock queue deadlines permits limits fences pqueue pdeadlines
--! args: pub msg
-- queue, deadlines: the lock's fair queue; pqueue, pdeadlines: the semaphore's queue. pub: PUBLISH
-- or SPUBLISH; msg: the message that wakes a waiter of each client.
-- Returns the number of holds deleted: 1 for the lock, plus one per live permit.
--! include lock.lua
--! include queue.lua
local _, ms = now()
local n = 0
local s = lk_get(k_lock)
if s and s.tok ~= '' then
  redis.call('SET', k_lock, lk_enc(lk_free(s.f, int(s.f + 1))), 'PX', FREE_TTL)
  n = 1
  local w = q_first(k_queue, k_deadlines, false)
  redis.call(a_pub, k_lock .. ':released', w and redis.sha1hex(w.tok) or a_msg)
end
local freed = redis.call('ZCOUNT', k_permits, '(' .. ms, '+inf')
redis.call('DEL', k_permits, k_limits, k_fences)
if freed == 0 then
  return n
end
-- The first live waiters may take the freed permits: name each of them, as releases do; a
-- semaphore without live waiters gets one client message per freed permit.
q_first(k_pqueue, k_pdeadlines, false) -- (drops the dead at the head)
local queue = redis.call('ZRANGE', k_pqueue, 0, math.min(freed, 1000) - 1)
for i = 1, math.min(freed, 1000) do
  local msg = a_msg
  if #queue > 0 then
    local w = queue[i] and q_parse(queue[i], 0)
    msg = w and redis.sha1hex(w.tok) or ''
  end
  redis.call(a_pub, k_permits .. ':released', msg)
end
return n + freed
