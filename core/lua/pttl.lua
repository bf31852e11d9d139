#!lua flags=no-writes
-- Owner-checked remaining TTL (Lock.TTL). Flagged no-writes (Redis refuses it any write, and runs
-- it while writes are refused, e.g. min-replicas-to-write not met), but sent with EVALSHA, not
-- EVALSHA_RO: a client that routes read-only commands to replicas would otherwise ask a replica,
-- which may not have the lock yet.
-- KEYS[1] lock; ARGV[1] owner token, ARGV[2] the acquisition's fence ('' on Redlock; see renew.lua)
-- Returns the PTTL in ms, or -3 when the token does not hold the lock.
local v = redis.call('GET', KEYS[1])
local pre = ARGV[1] .. '\0'
if ARGV[2] and ARGV[2] ~= '' then pre = pre .. ARGV[2] .. '\0' end
if v and v:sub(1, #pre) == pre then
  return redis.call('PTTL', KEYS[1])
end
return -3
