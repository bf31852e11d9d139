-- A semaphore (Permits): three keys with the name's hash tag hold its leases,
--
--   permits  ZSET token -> lease expiry (server clock, ms): one member per held permit;
--   limits   ZSET token -> the limit its acquirer passed;
--   fences   HASH token -> the permit's fence, token NUL -> "ACQUIRED_MS HOST PID LABEL" (Inspect);
--
-- plus its queue (queue.lua, X being the waiter's limit). A read-write lock is the same under
-- ':rw' (its family; a semaphore's is ':permits'). One name, one lock: while a family holds leases,
-- the name's lock key holds the family's mark (lock.lua), which keeps the name's last fence, keeps
-- every other kind of hold out and lives at least as long as the family's longest lease; the last
-- lease released frees the name. A lease is live while the server's clock is below its expiry;
-- expired leases are dropped by the next acquire or release (sem_reclaim). A lease counts only
-- while the lock key holds its family's mark: when the key is lost alone (evicted, deleted, lost in
-- a failover), another kind of hold may be granted the name, so the family's leases are lost as a
-- lock is when its key goes. Their renewals, Extends, releases and replayed acquisitions answer
-- "not held" (sem_marked), and the family's next fresh mark drops them (sem_orphans) rather than
-- reviving them.
--! include lock.lua
--! include queue.lua
--! include grant.lua
--! include keep.lua

-- sem_mark is the mark of the family whose leases are under permits (lock.lua).
local function sem_mark(lock, permits)
  return '\1' .. permits:sub(#lock + 2)
end

-- sem_marked reports whether the lock key holds the family's mark: the family's leases are holds
-- of the name only while it does (see above). One GET and a prefix compare, no parse.
local function sem_marked(lock, permits)
  local v = redis.call('GET', lock)
  local mark = sem_mark(lock, permits) .. '\0'
  return v and v:sub(1, #mark) == mark
end

-- sem_other returns the lock's value when another kind of hold has the name (a lock's owner, or
-- another family's live mark), else nil and the value (lk_live: nil for a missing key).
local function sem_other(lock, permits)
  local s = lk_live(lock, lk_get(lock))
  if s and s.tok ~= '' and s.tok ~= sem_mark(lock, permits) then
    return s, s
  end
  return nil, s
end

-- sem_orphans drops the family's leases when s, the lock key's live value (sem_other's), is not
-- the family's mark, before a grant makes a fresh one: they are expired, or orphans whose mark was
-- lost (another kind may have held the name since), whose holders must not be revived by the new
-- mark; their renewals then find no lease. The limits and fences of the dropped go with them.
local function sem_orphans(lock, permits, limits, fences, s)
  if not (s and s.tok == sem_mark(lock, permits)) then
    redis.call('DEL', permits, limits, fences)
  end
end

-- sem_vacate frees the name when the family holds no lease any more: the mark becomes a free
-- value (keeping the fence and the chain of owner releases for FREE_TTL) and the waiters of the
-- other kinds that flagged it are woken (lk_tell).
local function sem_vacate(lock, permits, pub)
  if redis.call('ZCARD', permits) > 0 then
    return
  end
  local s = lk_get(lock)
  if s and s.tok == sem_mark(lock, permits) then
    redis.call('SET', lock, lk_enc(lk_free(s.f, s.rel)), 'PX', FREE_TTL)
    lk_tell(pub, lock, s.w, '')
  end
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

-- sem_reclaim drops the leases that expired (their holders crashed or lost them).
local function sem_reclaim(permits, limits, fences)
  local _, ms = now()
  while true do
    local gone = redis.call('ZRANGEBYSCORE', permits, '-inf', ms, 'LIMIT', 0, 500)
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

-- sem_lengthen makes the lease of token expire ttl from now, unless it expires later already, and
-- the semaphore's keys live at least as long; it returns the lease's expiry (ms).
local function sem_lengthen(permits, limits, fences, lock, token, until_ms)
  local _, ms = now()
  local s = tonumber(redis.call('ZSCORE', permits, token))
  if until_ms > s then
    redis.call('ZADD', permits, 'XX', until_ms, token)
  else
    until_ms = s
  end
  keep(permits, until_ms - ms)
  keep(limits, until_ms - ms)
  keep(fences, until_ms - ms)
  redis.call('PEXPIRE', lock, until_ms - ms, 'GT')
  return until_ms
end

-- sem_held answers an acquisition by a token that holds a live permit already: a replay (go-redis
-- retries a script whose reply was lost) or a waiter's attempt after a release granted it a permit
-- (handoff). The lease is lengthened to ttl from now, so that the caller may count its lease from
-- when it sent this attempt. Returns the permit's fence, or nil (also when the family's mark is
-- gone: the lease is lost, and the attempt goes on as a fresh one).
local function sem_held(permits, limits, fences, lock, token, ttl)
  local _, ms = now()
  local s = redis.call('ZSCORE', permits, token)
  if s and tonumber(s) > ms and sem_marked(lock, permits) then
    sem_lengthen(permits, limits, fences, lock, token, ms + tonumber(ttl))
    return tonumber(redis.call('HGET', fences, token))
  end
  return nil
end

-- sem_grant gives token a permit for ttl ms and returns its fence; label is the holder's
-- "HOST PID LABEL", recorded with the server's clock for Inspect. The caller made sure that no
-- other kind of hold has the name (sem_other) and dropped the orphans (sem_orphans): the fence is
-- the next of the name's one sequence, kept in the lock key's mark, which lives at least as long as
-- the lease.
local function sem_grant(permits, limits, fences, lock, token, ttl, limit, label)
  local _, ms = now()
  local lease = tonumber(ttl)
  local s = lk_live(lock, lk_get(lock))
  local f = next_fence(s and s.f, nil)
  local mark = sem_mark(lock, permits)
  if s and s.tok == mark then
    s.f = f
    lk_keep(lock, s)
    redis.call('PEXPIRE', lock, lease, 'GT')
  else
    redis.call('SET', lock, lk_enc({tok = mark, f = f, holds = '', w = s and s.w or '0',
      rel = s and s.rel or int(f - 10000000), acq = '', label = '', extra = ''}), 'PX', lease)
  end
  redis.call('ZADD', permits, ms + lease, token)
  redis.call('ZADD', limits, limit, token)
  redis.call('HSET', fences, token, int(f), token .. '\0', int(ms) .. ' ' .. (label or ''))
  keep(permits, lease)
  keep(limits, lease)
  keep(fences, lease)
  return f
end

-- sem_busy returns -1 - the time until the earliest lease expires (0 if it is about to).
local function sem_busy(permits)
  local _, ms = now()
  local first = redis.call('ZRANGE', permits, 0, 0, 'WITHSCORES')
  local wait = 0
  if first[2] then
    wait = tonumber(first[2]) - ms
  end
  if wait < 0 then
    wait = 0
  end
  return -1 - wait
end

-- sem_handoff grants the free permits to the live waiters at the head of the queue, in order, each
-- as its own acquisition would have (lease, limit, fence), and tells each (grant.lua). It stops at
-- a waiter that has no room (the limits). Returns the number of permits granted.
local function sem_handoff(permits, limits, fences, lock, queue, deadlines, pub)
  local n = 0
  local other, cur = sem_other(lock, permits)
  if other then
    return 0 -- another kind of hold has the name: its release wakes the queue
  end
  sem_orphans(lock, permits, limits, fences, cur)
  while true do
    local w = q_first(queue, deadlines, false)
    if not w then
      return n
    end
    local room = sem_room(permits, limits, w.x)
    if room <= 0 then
      return n
    end
    q_leave(queue, deadlines, w.m)
    local f = sem_grant(permits, limits, fences, lock, w.tok, w.ttl, w.x, w.label)
    grant_tell(pub, permits .. ':released', w, f)
    n = n + 1
    -- The grant took one permit and its limit joined the holders': whatever the next waiter's
    -- limit, its room is below this one's.
    if room <= 1 then
      return n
    end
  end
end

-- sem_wake tells the waiters of the semaphore that permits are free but nobody could be granted
-- one (as a release without handoff): in fair mode the message names the waiter whose turn the last
-- of the free permits is; otherwise, or with no live waiter queued, it is msg (a client's id: one
-- waiter of each client tries; '' wakes the first waiter of each).
local function sem_wake(permits, limits, queue, deadlines, pub, msg, fair, limit)
  if fair then
    local head = q_first(queue, deadlines, false)
    if head then
      local free = sem_room(permits, limits, limit or '1')
      local nth = head
      if free > 1 then
        local m = redis.call('ZRANGE', queue, free - 1, free - 1, 'WITHSCORES')
        nth = (m[1] and q_parse(m[1], m[2])) or head
      end
      msg = redis.sha1hex(nth.tok)
    end
  end
  redis.call(pub, permits .. ':released', msg)
end
