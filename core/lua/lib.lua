-- Shared functions, prepended to the acquire scripts when they are loaded (Redis scripts cannot
-- include one another).

-- fence returns the next fencing token: the counter + 1, but never below a clock (milliseconds ×
-- 1000), so that fences keep increasing even if the counter is lost (restart without persistence,
-- failover before replication): neither takes less than a millisecond. Millisecond steps let the
-- counter win, and spare the SET, for all but the first acquisition of a name in a millisecond.
-- The clock is the server's, or the floor the client passes (Redlock: one floor for every node, so
-- that the nodes agree and no write-back is needed).
local function fence(key, floorArg)
  local f = redis.call('INCR', key)
  local floor = tonumber(floorArg or '')
  if not floor then
    local t = redis.call('TIME')
    floor = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
  end
  if f < floor then
    redis.call('SET', key, string.format('%.0f', floor))
    return floor
  end
  return f
end

-- Holds are recorded twice in the lock hash: token -> hold count (the owner's entry, checked by
-- renewals), and token NUL hold -> 1 for each hold, so that a replayed call (go-redis retries a
-- script whose reply was lost) finds its own hold and counts nothing twice.

-- take creates the lock for token (the caller checked that it is free) and returns the new fence.
local function take(lock, fenceKey, token, hold, ttl, floorArg)
  redis.call('HSET', lock, token, 1, token .. '\0' .. hold, 1)
  redis.call('PEXPIRE', lock, ttl)
  return fence(fenceKey, floorArg)
end

-- reenter adds hold to token's holds if token holds the lock, keeping the longer of the two TTLs,
-- and returns {fence, holds}; nil if token does not hold it. A replay of the call that took or
-- re-entered with this hold changes nothing and answers the same.
local function reenter(lock, fenceKey, token, hold, ttl)
  if redis.call('HEXISTS', lock, token) == 0 then
    return nil
  end
  local holds
  if redis.call('HSETNX', lock, token .. '\0' .. hold, 1) == 1 then
    holds = redis.call('HINCRBY', lock, token, 1)
  else
    holds = tonumber(redis.call('HGET', lock, token))
  end
  if redis.call('PTTL', lock) < tonumber(ttl) then
    redis.call('PEXPIRE', lock, ttl)
  end
  return {tonumber(redis.call('GET', fenceKey) or '0'), holds}
end

-- drop removes hold from token's holds. It returns the holds left, or -1 when token does not hold
-- the lock, and nil when the lock is now free (the caller deletes it and tells the waiters). A
-- replay of a release that ran already answers as the release did: the holds left, or 0 when the
-- receipt key says this hold was the last.
local function drop(lock, receipt, token, hold)
  local field = token .. '\0' .. hold
  if redis.call('HDEL', lock, field) == 0 then
    local holds = redis.call('HGET', lock, token)
    if holds then
      return tonumber(holds)
    end
    if redis.call('GET', receipt) == field then
      return 0
    end
    return -1
  end
  local holds = redis.call('HINCRBY', lock, token, -1)
  if holds > 0 then
    return holds
  end
  redis.call('DEL', lock)
  redis.call('SET', receipt, field, 'PX', 5000)
  return nil
end

-- busy returns -1 - the remaining TTL of a lock held by someone else.
local function busy(lock)
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 end
  return -1 - pttl
end
