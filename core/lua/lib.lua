-- Shared functions, prepended to the scripts when they are loaded (Redis scripts cannot include
-- one another): the semaphore's fence counter and fair queue, keys' TTLs. (The lock's value is in
-- lock_lib.lua, its fair queue in fair_lib.lua.)

-- fence returns the next fencing token of a semaphore's permit: the counter + 1, but never below a clock (milliseconds ×
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

-- next_waiter drops the waiters at the head of a semaphore's fair queue whose deadline passed and
-- returns the first live one (nil if none).
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

-- keep makes key live at least ms more: never shortens it (what it holds may rely on it). It
-- gives the key twice that, so that the calls that follow within ms find it long enough and
-- write nothing (a key outlives what it holds by at most twice its lease).
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms * 2)
  end
end
