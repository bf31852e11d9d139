-- The one queue design: waiters of a fair lock (Fair) and of a semaphore (Permits) queue in Redis,
-- first come first served, with what a release needs to grant them the lock or a permit directly
-- (direct handoff, grant.lua). Two keys with the name's hash tag:
--
--   queue      ZSET of the waiters. A member is  TTL  TIMEOUT  TOKEN  X  LABEL  (NUL-separated):
--              the TTL (ms) and queue timeout (ms) the waiter asked for, its token, X (a lock
--              waiter's hold id; a permit waiter's limit) and its holder label. Its score is
--              2 × EPOCH, + 1 once the waiter refreshed its deadline; EPOCH is the server's clock
--              in µs when the waiter queued, which orders the queue and names this queueing in
--              grants.
--   deadlines  HASH member -> deadline (server clock, ms), of the waiters that refreshed theirs.
--
-- A waiter is live until EPOCH (in ms) + TIMEOUT, or the later deadline it refreshed: each of its
-- attempts (a poll, at least every third of TIMEOUT) refreshes it. Dead waiters are dropped when
-- they reach the head (q_first, the one sweep). Both keys live at least TIMEOUT after a waiter
-- joined or refreshed, at most twice that (keep).
--! include clock.lua
--! include keep.lua

-- q_member is the queue member of a waiter.
local function q_member(ttl, timeout, token, x, label)
  return ttl .. '\0' .. timeout .. '\0' .. token .. '\0' .. x .. '\0' .. (label or '')
end

-- q_parse reads a member and its score; nil for a member this version did not write.
local function q_parse(m, score)
  local ttl, timeout, tok, x, label = string.match(m, '^(%d+)%z(%d+)%z([^%z]+)%z([^%z]*)%z(.*)$')
  local sc = tonumber(score)
  if not ttl or not sc then
    return nil
  end
  return {m = m, ttl = ttl, timeout = tonumber(timeout), tok = tok, x = x, label = label,
    epoch = math.floor(sc / 2), refreshed = sc % 2 == 1}
end

-- q_deadline returns waiter w's deadline in ms (it reads the deadlines hash only if w refreshed).
local function q_deadline(deadlines, w)
  local dl = w.epoch / 1000 + w.timeout
  if w.refreshed then
    local r = tonumber(redis.call('HGET', deadlines, w.m) or '0')
    if r > dl then
      dl = r
    end
  end
  return dl
end

-- q_first returns the first live waiter (nil if none), dropping the dead waiters ahead of it, and
-- takes it out of the queue when take is set.
local function q_first(queue, deadlines, take)
  local _, ms = now()
  while true do
    local p
    if take then
      p = redis.call('ZPOPMIN', queue)
    else
      p = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    end
    if #p == 0 then
      return nil
    end
    local w = q_parse(p[1], p[2])
    local live = w and q_deadline(deadlines, w) >= ms
    if (take or not live) and (not w or w.refreshed) then
      redis.call('HDEL', deadlines, p[1])
    end
    if live then
      return w
    end
    if not take then
      redis.call('ZREM', queue, p[1])
    end
  end
end

-- q_wait queues member m (at the tail) or, if it is queued already, refreshes its deadline to now
-- + timeout. It returns the waiter's EPOCH.
local function q_wait(queue, deadlines, m, timeout)
  local us, ms = now()
  local score = us * 2
  if redis.call('ZADD', queue, 'NX', int(score), m) == 0 then
    score = tonumber(redis.call('ZSCORE', queue, m))
    if score % 2 == 0 then
      score = score + 1
      redis.call('ZADD', queue, 'XX', int(score), m)
    end
    redis.call('HSET', deadlines, m, int(ms + timeout))
    keep(deadlines, timeout)
  end
  keep(queue, timeout)
  return math.floor(score / 2)
end

-- q_leave takes member m out of the queue; it reports whether m was queued.
local function q_leave(queue, deadlines, m)
  if redis.call('ZREM', queue, m) == 0 then
    return false
  end
  redis.call('HDEL', deadlines, m)
  return true
end

-- q_live counts the live waiters without changing anything (read-only scripts).
local function q_live(queue, deadlines)
  local _, ms = now()
  local n = 0
  local all = redis.call('ZRANGE', queue, 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local w = q_parse(all[i], all[i + 1])
    if w and q_deadline(deadlines, w) >= ms then
      n = n + 1
    end
  end
  return n
end
