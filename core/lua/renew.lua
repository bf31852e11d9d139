-- Owner-checked renewal (also used by Extend): GET + PEXPIRE GT. Hold counts are left as they are,
-- and so is a TTL longer than the one asked for: another hold of the lock (a co-owner through
-- WithOwner, with a longer TTL) may rely on it.
-- A hold renews only the acquisition it belongs to: the value must start with the token and, when
-- given, the acquisition's fence (an acquisition taken afresh with the same token, e.g. after a
-- ForceRelease, is not the holder's).
-- KEYS[1] lock; ARGV[1] owner token, ARGV[2] TTL in ms, ARGV[3] the acquisition's fence ('' on
-- Redlock, whose nodes may record different fences)
-- Returns 1 when renewed, 0 when the token does not hold the lock.
local v = redis.call('GET', KEYS[1])
local pre = ARGV[1] .. '\0'
if ARGV[3] and ARGV[3] ~= '' then pre = pre .. ARGV[3] .. '\0' end
if v and v:sub(1, #pre) == pre then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  return 1
end
return 0
