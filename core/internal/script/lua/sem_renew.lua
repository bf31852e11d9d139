-- Owner-checked renewal of a permit's lease (also Extend): its expiry becomes now + ttl unless it
-- is already later (renewals never shorten a lease), and the semaphore's keys live at least as long.
--! keys: permits limits fences
--! args: token ttl
-- Returns 1 when renewed, 0 when the token holds no live permit.
--! include sem.lua
local _, ms = now()
local s = redis.call('ZSCORE', k_permits, a_token)
if not s or tonumber(s) <= ms then
  return 0
end
sem_lengthen(k_permits, k_limits, k_fences, a_token, ms + tonumber(a_ttl))
return 1
