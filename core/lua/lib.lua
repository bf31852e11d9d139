-- Shared functions, prepended to the acquire scripts when they are loaded (Redis scripts cannot
-- include one another).

-- FENCE is the lock hash's field that holds the fence of the acquisition it belongs to (a token
-- cannot start with a NUL byte, so no owner field can clash with it).
local FENCE = '\0fence'

-- fence returns the next fencing token: the counter + 1, but never below a clock (milliseconds ×
-- 1000), so that fences keep increasing even if the counter is lost (restart without persistence,
-- failover before replication, or its own expiry): neither takes less than a millisecond.
-- Millisecond steps let the counter win, and spare the SET, for all but the first acquisition of a
-- name in a millisecond. The clock is the server's, or the floor the client passes (Redlock: one
-- floor for every node, so that the nodes agree and no write-back is needed); a counter that is
-- missing (INCR answers 1) always takes the server's clock too, so a client clock that runs behind
-- cannot take fences back after the counter expired.
-- The counter expires ctr_ttl ms after the last acquisition (lockkit writes no key without a TTL);
-- the clock floor keeps fences increasing across that expiry.
-- It also returns the server's clock in milliseconds when it read it (nil otherwise).
local function fence(key, floorArg, ctr_ttl)
  local f = redis.call('INCR', key)
  local floor = tonumber(floorArg or '')
  local now_ms
  if not floor or f == 1 then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local now = now_ms * 1000
    if not floor or now > floor then floor = now end
  end
  if f < floor then
    redis.call('SET', key, string.format('%.0f', floor), 'PX', ctr_ttl)
    return floor, now_ms
  end
  redis.call('PEXPIRE', key, ctr_ttl)
  return f, now_ms
end

-- counter_ttl is how long a fence counter outlives the last acquisition: the lock's TTL, at least
-- 10 s.
local function counter_ttl(ttl)
  local t = tonumber(ttl)
  if t < 10000 then t = 10000 end
  return t
end

-- Holds are recorded twice in the lock hash: token -> hold count (the owner's entry, checked by
-- renewals), and token NUL hold -> 1 for each hold, so that a replayed call (go-redis retries a
-- script whose reply was lost) finds its own hold and counts nothing twice.

-- A third field, token NUL (an empty hold id), describes the acquisition for Inspect: the server's
-- clock in milliseconds when it was taken, a space, and the holder's label (host, pid and the
-- application's label, precomputed by the client).

-- take creates the lock for token (the caller checked that it is free) and returns the new fence,
-- which it also records in the lock hash (re-entries answer it from there).
local function take(lock, fenceKey, token, hold, ttl, floorArg, label)
  local f, now_ms = fence(fenceKey, floorArg, counter_ttl(ttl))
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  redis.call('HSET', lock, token, 1, token .. '\0' .. hold, 1, FENCE, string.format('%.0f', f),
    token .. '\0', string.format('%.0f', now_ms) .. ' ' .. (label or ''))
  redis.call('PEXPIRE', lock, ttl)
  return f
end

-- extend sets the lock's TTL to ttl unless it already has more: a TTL another hold of the lock
-- relies on (a co-owner with a longer TTL) is never shortened.
local function extend(lock, ttl)
  if redis.call('PTTL', lock) < tonumber(ttl) then
    redis.call('PEXPIRE', lock, ttl)
  end
end

-- held_fence is the fence of the acquisition a lock hash belongs to.
local function held_fence(lock, fenceKey)
  return tonumber(redis.call('HGET', lock, FENCE) or redis.call('GET', fenceKey) or '0')
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
  extend(lock, ttl)
  return {held_fence(lock, fenceKey), holds}
end

-- drop removes hold from token's holds. It returns the holds left, or -1 when token does not hold
-- the lock, and nil when the lock is now free (the caller deletes it and tells the waiters). A
-- replay of a release that ran already answers as the release did: the holds left, or 0 when the
-- receipt says the acquisition this hold belonged to was released (the receipt key is named after
-- that acquisition's fence, so the release of another acquisition of the name cannot hide it; and
-- the lock is deleted only when every hold of the owner was dropped, this one included).
local function drop(lock, receipt, token, hold)
  local field = token .. '\0' .. hold
  if redis.call('HDEL', lock, field) == 0 then
    local holds = redis.call('HGET', lock, token)
    if holds then
      return tonumber(holds)
    end
    if redis.call('EXISTS', receipt) == 1 then
      return 0
    end
    return -1
  end
  local holds = redis.call('HINCRBY', lock, token, -1)
  if holds > 0 then
    return holds
  end
  redis.call('DEL', lock)
  redis.call('SET', receipt, 1, 'PX', 5000)
  return nil
end

-- next_waiter drops the waiters at the head of a fair queue whose deadline passed and returns the
-- first live one (nil if none).
local function next_waiter(queue, deadlines)
  local nxt = redis.call('LINDEX', queue, 0)
  if nxt then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while nxt do
      local dl = tonumber(redis.call('HGET', deadlines, nxt) or '0')
      if dl >= now then break end
      redis.call('LPOP', queue)
      redis.call('HDEL', deadlines, nxt)
      nxt = redis.call('LINDEX', queue, 0)
    end
  end
  return nxt
end

-- busy returns -1 - the remaining TTL of a lock held by someone else.
local function busy(lock)
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 end
  return -1 - pttl
end
