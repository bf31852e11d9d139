-- Owner-checked remaining lease of a permit (Lock.TTL). It writes nothing (see pttl.lua).
--! keys: permits fences
--! args: token fence
-- fence: the permit's (sem_renew.lua: a holder's lease is the one that carries its fence).
-- Returns the remaining lease in ms, or -3 when the token holds no live permit of that fence.
--! include clock.lua
local s = redis.call('ZSCORE', k_permits, a_token)
if not s or redis.call('HGET', k_fences, a_token) ~= a_fence then
  return -3
end
local _, ms = now()
local left = tonumber(s) - ms
if left <= 0 then
  return -3
end
return left
