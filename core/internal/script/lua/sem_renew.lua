-- Owner-checked renewal of a permit's lease (also Extend): its expiry becomes now + ttl unless it
-- is already later (renewals never shorten a lease), and the semaphore's keys live at least as long.
-- A holder renews only the lease it belongs to: the token's lease must carry its fence (a lease
-- granted to the token afresh, e.g. to a waiter place a failover brought back, is not its own).
--! keys: permits limits fences lock
--! args: token ttl fence
-- lock: the name's lock key, whose family mark lives at least as long as the lease (sem.lua).
-- Returns 1 when renewed, 0 when the token holds no live permit of that fence.
--! include sem.lua
local _, ms = now()
local s = redis.call('ZSCORE', k_permits, a_token)
if not s or tonumber(s) <= ms or redis.call('HGET', k_fences, a_token) ~= a_fence then
  return 0
end
sem_lengthen(k_permits, k_limits, k_fences, k_lock, a_token, ms + tonumber(a_ttl))
return 1
