-- Owner-checked remaining lease of a permit (Lock.TTL). It writes nothing (see pttl.lua).
--! keys: permits
--! args: token
-- Returns the remaining lease in ms, or -3 when the token holds no live permit.
--! include clock.lua
local s = redis.call('ZSCORE', k_permits, a_token)
if not s then
  return -3
end
local _, ms = now()
local left = tonumber(s) - ms
if left <= 0 then
  return -3
end
return left
