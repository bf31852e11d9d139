-- Owner-checked renewal (also Extend): GET + PEXPIRE GT. Hold counts are left as they are, and so
-- is a TTL longer than the one asked for: another hold of the lock (a co-owner through WithOwner,
-- with a longer TTL) may rely on it. A hold renews only the acquisition it belongs to: the value
-- must start with the token and, when given, the acquisition's fence (an acquisition taken afresh
-- under the same token, e.g. after a ForceRelease, is not the holder's).
--! keys: lock
--! args: token ttl fence
-- fence: '' on Redlock, whose nodes may record different fences for one acquisition.
-- Returns 1 when renewed, 0 when the token does not hold the lock.
local v = redis.call('GET', k_lock)
local pre = a_token .. '\0'
if a_fence ~= '' then
  pre = pre .. a_fence .. '\0'
end
if v and v:sub(1, #pre) == pre then
  redis.call('PEXPIRE', k_lock, a_ttl, 'GT')
  return 1
end
return 0
