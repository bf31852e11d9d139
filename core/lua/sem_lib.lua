-- Shared functions of the semaphore scripts, loaded after lib.lua (fence, counter_ttl,
-- next_waiter, keep). A semaphore is three keys with the name's hash tag:
--   permits (ZSET token -> lease expiry, server clock in ms): one member per held permit;
--   limits  (ZSET token -> the limit its acquirer passed);
--   fences  (HASH token -> the permit's fence, token NUL -> ACQUIRED_MS HOST PID LABEL for Inspect);
-- plus the semaphore's fence counter (NAME:fence; the lock of the same name keeps its fence in its
-- own value and never reads it). A lease is live while the
-- server's clock is below its expiry; expired leases are dropped by the next acquire or release
-- (reclaim).
-- Waiters queue in Redis (fair or not): queue (LIST of tokens, FIFO), deadlines (HASH token -> ms
-- until which the waiter counts as live; it refreshes it by polling) and waiters (HASH token ->
-- "EPOCH TTL LIMIT HOST PID LABEL": what a release needs to grant it a permit directly, EPOCH being
-- the number of the acquire attempt that registered it).

local function sem_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- sem_drop forgets the given tokens' permits.
local function sem_drop(permits, limits, fences, tokens)
  redis.call('ZREM', permits, unpack(tokens))
  redis.call('ZREM', limits, unpack(tokens))
  local fields = {}
  for _, tok in ipairs(tokens) do
    fields[#fields + 1] = tok
    fields[#fields + 1] = tok .. '\0'
  end
  redis.call('HDEL', fences, unpack(fields))
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

-- sem_replay answers an acquisition by a token that holds a live permit already: a replay (go-redis
-- retries a script whose reply was lost) or a waiter's poll after a release granted it a permit
-- (handoff). The lease is lengthened to ttl from now, so that the caller may count its lease from
-- when it sent this attempt. Returns the permit's fence, or nil.
local function sem_replay(permits, limits, fences, token, ttl, now)
  local s = redis.call('ZSCORE', permits, token)
  if s and tonumber(s) > now then
    local ms = tonumber(ttl)
    if tonumber(s) < now + ms then
      redis.call('ZADD', permits, 'XX', now + ms, token)
      keep(permits, ms)
      keep(limits, ms)
      keep(fences, ms)
    end
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
  keep(permits, ms)
  keep(limits, ms)
  keep(fences, ms)
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

-- sem_register queues token as a waiter (at the tail if it is new) until now + timeout ms, with
-- what a release needs to grant it a permit; the queue's keys outlive the deadline.
local function sem_register(queue, deadlines, waiters, token, now, timeout, epoch, ttl, limit, label)
  if redis.call('HEXISTS', deadlines, token) == 0 then
    redis.call('RPUSH', queue, token)
  end
  redis.call('HSET', deadlines, token, now + timeout)
  redis.call('HSET', waiters, token, epoch .. ' ' .. ttl .. ' ' .. limit .. ' ' .. (label or ''))
  -- The queue outlives its waiters: lengthen its TTL, never shorten it.
  keep(queue, timeout * 2)
  keep(deadlines, timeout * 2)
  keep(waiters, timeout * 2)
end

-- sem_unqueue takes token out of the waiters' queue.
local function sem_unqueue(queue, deadlines, waiters, token)
  redis.call('LREM', queue, 0, token)
  redis.call('HDEL', deadlines, token)
  redis.call('HDEL', waiters, token)
end

-- sem_next_waiter is lib.lua's next_waiter with the caller's clock, which also forgets the grant
-- details of the waiters it drops: it drops the waiters at the head of the queue whose deadline
-- passed by now and returns the first live one (nil if none).
local function sem_next_waiter(queue, deadlines, waiters, now)
  local nxt = redis.call('LINDEX', queue, 0)
  while nxt do
    if tonumber(redis.call('HGET', deadlines, nxt) or '0') >= now then
      return nxt
    end
    redis.call('LPOP', queue)
    redis.call('HDEL', deadlines, nxt)
    redis.call('HDEL', waiters, nxt)
    nxt = redis.call('LINDEX', queue, 0)
  end
  return nil
end

-- sem_handoff grants the free permits to the live waiters at the head of the queue, in order, each
-- as its own acquisition would have (lease, limit, fence), and tells each in a message on channel:
-- "g:" SHA1(token) ":" fence ":" epoch. It stops at a waiter that has no room (the limits) or
-- that registered without its grant details. Returns the number of permits granted.
local function sem_handoff(permits, limits, fences, counter, queue, deadlines, waiters, pub, channel, now)
  local n = 0
  while true do
    local head = sem_next_waiter(queue, deadlines, waiters, now)
    if not head then
      return n
    end
    local epoch, ttl, limit, label = string.match(redis.call('HGET', waiters, head) or '',
      '^(%d+) (%d+) (%d+) (.*)$')
    local room = 0
    if epoch then
      room = sem_room(permits, limits, limit)
    end
    if room <= 0 then
      return n
    end
    redis.call('LPOP', queue)
    redis.call('HDEL', deadlines, head)
    redis.call('HDEL', waiters, head)
    local f = sem_grant(permits, limits, fences, counter, head, ttl, limit, now, label)
    redis.call(pub, channel, 'g:' .. redis.sha1hex(head) .. ':' .. string.format('%.0f', f) .. ':' .. epoch)
    n = n + 1
    -- The grant took one permit and its limit joined the holders': whatever the next waiter's
    -- limit, its room is below this one's.
    if room <= 1 then
      return n
    end
  end
end
