-- Owner-checked remaining TTL of a lock (Lock.TTL). It writes nothing, but goes with EVALSHA: a
-- client that reads from replicas would send a read-only command (EVALSHA_RO) to a replica that
-- may not have the lock yet.
--! keys: lock
--! args: token fence
-- fence: as renew.lua's.
-- Returns the PTTL in ms, or -3 when the token does not hold the lock.
local v = redis.call('GET', k_lock)
local pre = a_token .. '\0'
if a_fence ~= '' then
  pre = pre .. a_fence .. '\0'
end
if v and v:sub(1, #pre) == pre then
  return redis.call('PTTL', k_lock)
end
return -3
