-- Owner-checked renewal of a permit's lease (also Extend): its expiry becomes now + ttl unless it
-- is already later (renewals never shorten a lease), and the semaphore's keys live at least as long.
-- A holder renews only the lease it belongs to: the token's lease must carry its fence (a lease
-- granted to the token afresh, e.g. to a waiter place a failover brought back, is not its own).
--! keys: permits limits fences lock
--! args: token ttl fence
-- lock: the name's lock key, whose family mark lives at least as long as the lease (sem.lua). A
-- lease whose mark is gone from it (the key lost alone, or holding another kind's owner or mark) is
-- lost, as a lock whose key went: the renewal drops it and answers 0, and never writes the lock key
-- (it may be another kind's by now).
-- Returns 1 when renewed, 0 when the token holds no live permit of that fence under its mark.
--! include sem.lua
local _, ms = now()
local s = redis.call('ZSCORE', k_permits, a_token)
if not s or tonumber(s) <= ms or redis.call('HGET', k_fences, a_token) ~= a_fence then
  return 0
end
if not sem_marked(k_lock, k_permits) then
  sem_drop(k_permits, k_limits, k_fences, {a_token})
  return 0
end
sem_lengthen(k_permits, k_limits, k_fences, k_lock, a_token, ms + tonumber(a_ttl))
return 1
