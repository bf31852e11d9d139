-- What Client.Inspect reports about a name's lock, semaphore and read-write lock, in one round
-- trip. Read-only: it writes nothing and changes no TTL (a read-only ACL user can run it, with
-- EVALSHA_RO).
--! keys: lock queue deadlines permits limits fences pqueue pdeadlines rw rwlimits rwfences rwqueue rwdeadlines
--! args:
--! flags: no-writes
-- queue, deadlines: the lock's fair queue; pqueue,
-- pdeadlines: the semaphore's queue; rw...: the read-write lock's leases and queue (sem.lua's keys).
-- Returns {the lock's value ('' if none; lock.lua: a lock's owner, or the mark of the family that
-- holds the name, with the name's last fence), its PTTL, live
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
return {redis.call('GET', k_lock) or '', redis.call('PTTL', k_lock),
  q_live(k_queue, k_deadlines), ms, leases(k_permits, k_limits, k_fences, ms), q_live(k_pqueue, k_pdeadlines),
  leases(k_rw, k_rwlimits, k_rwfences, ms), q_live(k_rwqueue, k_rwdeadlines)}
