-- What Client.Inspect reports about a name's lock, semaphore and read-write lock, in one round
-- trip. Read-only: it writes nothing and changes no TTL (a read-only ACL user can run it, with
-- EVALSHA_RO).
--! keys: lock queue deadlines counter permits limits fences pqueue pdeadlines rw rwlimits rwfences rwqueue rwdeadlines
--! args:
--! flags: no-writes
-- queue, deadlines: the lock's fair queue; counter: the semaphore's fence counter; pqueue,
-- pdeadlines: the semaphore's queue; rw...: the read-write lock's leases and queue (sem.lua's keys).
-- Returns {the lock's value ('' if none; lock.lua), its PTTL, the fence counter ('' if none), live
-- fair waiters, the server's clock in ms, the live permits as a flat list of token, lease expiry,
-- limit, fence, label (5 entries each, earliest expiry first), live permit waiters, the read-write
-- lock's live leases (the same 5 entries; limit 1: the writer), its live waiters}.
--! include queue.lua

-- leases lists the live leases of a permits ZSET (sem.lua) as token, expiry, limit, fence, label.
local function leases(permits, limits, fences, ms)
  local out = {}
  local live = redis.call('ZRANGEBYSCORE', permits, '(' .. ms, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    local tok = live[i]
    local meta = redis.call('HMGET', fences, tok, tok .. '\0')
    out[#out + 1] = tok
    out[#out + 1] = live[i + 1]
    out[#out + 1] = redis.call('ZSCORE', limits, tok) or '0'
    out[#out + 1] = meta[1] or '0'
    out[#out + 1] = meta[2] or ''
  end
  return out
end

local _, ms = now()
return {redis.call('GET', k_lock) or '', redis.call('PTTL', k_lock), redis.call('GET', k_counter) or '',
  q_live(k_queue, k_deadlines), ms, leases(k_permits, k_limits, k_fences, ms), q_live(k_pqueue, k_pdeadlines),
  leases(k_rw, k_rwlimits, k_rwfences, ms), q_live(k_rwqueue, k_rwdeadlines)}
