-- What Client.Inspect reports about a name's lock and semaphore, in one round trip. Read-only: it
-- writes nothing and changes no TTL (a read-only ACL user can run it, with EVALSHA_RO).
--! keys: lock queue deadlines counter permits limits fences pqueue pdeadlines
--! args:
--! flags: no-writes
-- queue, deadlines: the lock's fair queue; counter: the semaphore's fence counter; pqueue,
-- pdeadlines: the semaphore's queue.
-- Returns {the lock's value ('' if none; lock.lua), its PTTL, the fence counter ('' if none), live
-- fair waiters, the server's clock in ms, the live permits as a flat list of token, lease expiry,
-- limit, fence, label (5 entries each, earliest expiry first), live permit waiters}.
--! include queue.lua
local _, ms = now()
local permits = {}
local leases = redis.call('ZRANGEBYSCORE', k_permits, '(' .. ms, '+inf', 'WITHSCORES')
for i = 1, #leases, 2 do
  local tok = leases[i]
  local meta = redis.call('HMGET', k_fences, tok, tok .. '\0')
  permits[#permits + 1] = tok
  permits[#permits + 1] = leases[i + 1]
  permits[#permits + 1] = redis.call('ZSCORE', k_limits, tok) or '0'
  permits[#permits + 1] = meta[1] or '0'
  permits[#permits + 1] = meta[2] or ''
end
return {redis.call('GET', k_lock) or '', redis.call('PTTL', k_lock), redis.call('GET', k_counter) or '',
  q_live(k_queue, k_deadlines), ms, permits, q_live(k_pqueue, k_pdeadlines)}
