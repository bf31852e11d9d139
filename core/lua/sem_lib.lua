-- Shared functions of the semaphore scripts, loaded after lib.lua (fence, counter_ttl,
-- next_waiter). A semaphore is three keys with the name's hash tag:
--   permits (ZSET token -> lease expiry, server clock in ms): one member per held permit;
--   limits  (ZSET token -> the limit its acquirer passed);
--   fences  (HASH token -> the permit's fence, token NUL -> ACQUIRED_MS HOST PID LABEL for Inspect);
-- plus the name's fence counter (shared with the lock of the same name). A lease is live while the
-- server's clock is below its expiry; expired leases are dropped by the next acquire (reclaim).

local function sem_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- sem_keep makes key live at least ms more: never shortens it (other leases rely on it).
local function sem_keep(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- sem_drop forgets the given tokens' permits.
local function sem_drop(permits, limits, fences, tokens)
  redis.call('ZREM', permits, unpack(tokens))
  redis.call('ZREM', limits, unpack(tokens))
  redis.call('HDEL', fences, unpack(tokens))
  local meta = {}
  for i, tok in ipairs(tokens) do
    meta[i] = tok .. '\0'
  end
  redis.call('HDEL', fences, unpack(meta))
end

-- sem_reclaim drops the leases that expired by now (their holders crashed or lost them).
local function sem_reclaim(permits, limits, fences, now)
  while true do
    local gone = redis.call('ZRANGEBYSCORE', permits, '-inf', now, 'LIMIT', 0, 500)
    if #gone == 0 then
      return
    end
    sem_drop(permits, limits, fences, gone)
  end
end

-- sem_room returns how many permits a caller passing limit may take now: its own limit and every
-- holder's limit bound the number of holders, so no holder ever shares the semaphore with more
-- holders than it allowed.
local function sem_room(permits, limits, limit)
  local lim = tonumber(limit)
  local low = redis.call('ZRANGE', limits, 0, 0, 'WITHSCORES')
  if low[2] and tonumber(low[2]) < lim then
    lim = tonumber(low[2])
  end
  return lim - redis.call('ZCARD', permits)
end

-- sem_replay answers a replayed acquisition (go-redis retries a script whose reply was lost): the
-- fence of token's live permit, or nil.
local function sem_replay(permits, fences, token, now)
  local s = redis.call('ZSCORE', permits, token)
  if s and tonumber(s) > now then
    return tonumber(redis.call('HGET', fences, token))
  end
  return nil
end

-- sem_grant gives token a permit for ttl ms and returns its fence; label is the holder's
-- "HOST PID LABEL", recorded with the server's clock for Inspect.
local function sem_grant(permits, limits, fences, counter, token, ttl, limit, now, label)
  local f = fence(counter, nil, counter_ttl(ttl))
  local ms = tonumber(ttl)
  redis.call('ZADD', permits, now + ms, token)
  redis.call('ZADD', limits, limit, token)
  redis.call('HSET', fences, token, string.format('%.0f', f),
    token .. '\0', string.format('%.0f', now) .. ' ' .. (label or ''))
  sem_keep(permits, ms)
  sem_keep(limits, ms)
  sem_keep(fences, ms)
  return f
end

-- sem_busy returns -1 - the time until the earliest lease expires (0 if it is about to).
local function sem_busy(permits, now)
  local first = redis.call('ZRANGE', permits, 0, 0, 'WITHSCORES')
  local wait = 0
  if first[2] then
    wait = tonumber(first[2]) - now
  end
  if wait < 0 then wait = 0 end
  return -1 - wait
end
