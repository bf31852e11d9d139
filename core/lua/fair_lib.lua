-- The fair queue of a lock (Fair), shared by the fair scripts (lib.lua and lock_lib.lua first).
-- Two keys with the lock's hash tag:
--
--   queue      ZSET of the waiters, first come first. A member is what a release needs to hand
--              the lock to that waiter directly:  TTL  TIMEOUT  TOKEN  HOLD  LABEL  (NUL-separated;
--              TTL the lock's TTL the waiter asked for and TIMEOUT its queue timeout, both in ms;
--              HOLD and LABEL as in the lock's value, see lock_lib.lua). Its score is 2 × EPOCH,
--              + 1 once the waiter refreshed its deadline; EPOCH is the server's clock in µs when
--              the waiter queued, which orders the queue and names this queueing in grants.
--   deadlines  HASH member -> deadline (server clock, ms), of the waiters that refreshed theirs.
--
-- A waiter is live until EPOCH (in ms) + TIMEOUT, or the later deadline it refreshed: every
-- acquire attempt of a queued waiter (a poll, at least every third of TIMEOUT) refreshes it.
-- Direct handoff: a release of the lock's last hold pops the first live waiter (ZPOPMIN) and
-- writes the lock's held value for it — the next fence, its hold, TTL and label, as its own
-- acquisition would (fq_give) — and publishes "g:" SHA1(TOKEN) ":" FENCE ":" EPOCH on the
-- release channel: the waiter holds without another round trip (core/handoff.go). So the hot
-- loop of a contended fair lock, release + the releasing worker queueing again, is GET TIME
-- ZPOPMIN SET PUBLISH and GET TIME ZADD PTTL PTTL: the deadlines hash is touched only by the
-- waiters that waited long enough to refresh.

-- fq_now returns the server's clock in µs and in ms.
local function fq_now()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, math.floor(us / 1000)
end

-- fq_member is the queue member of a waiter.
local function fq_member(ttl, timeout, token, hold, label)
  return ttl .. '\0' .. timeout .. '\0' .. token .. '\0' .. hold .. '\0' .. (label or '')
end

-- fq_parse reads a member and its score; nil for a member this version did not write.
local function fq_parse(m, score)
  local ttl, timeout, tok, hold, label = string.match(m, '^(%d+)%z(%d+)%z([^%z]+)%z([^%z]*)%z(.*)$')
  local sc = tonumber(score)
  if not ttl or not sc then
    return nil
  end
  return {m = m, ttl = ttl, timeout = tonumber(timeout), tok = tok, hold = hold, label = label,
    epoch = math.floor(sc / 2), refreshed = sc % 2 == 1}
end

-- fq_deadline returns waiter w's deadline in ms (it reads the deadlines hash only if w refreshed).
local function fq_deadline(deadlines, w)
  local dl = w.epoch / 1000 + w.timeout
  if w.refreshed then
    local r = tonumber(redis.call('HGET', deadlines, w.m) or '0')
    if r > dl then dl = r end
  end
  return dl
end

-- fq_pop takes the first live waiter out of the queue and returns it (nil if none), dropping the
-- waiters ahead of it whose deadline passed by now (ms).
local function fq_pop(queue, deadlines, now)
  while true do
    local p = redis.call('ZPOPMIN', queue)
    if #p == 0 then
      return nil
    end
    local w = fq_parse(p[1], p[2])
    if w then
      local dl = fq_deadline(deadlines, w)
      if w.refreshed then
        redis.call('HDEL', deadlines, w.m)
      end
      if dl >= now then
        return w
      end
    end
  end
end

-- fq_head returns the first live waiter without taking it out of the queue (nil if none),
-- dropping the waiters ahead of it whose deadline passed by now (ms).
local function fq_head(queue, deadlines, now)
  while true do
    local p = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    if #p == 0 then
      return nil
    end
    local w = fq_parse(p[1], p[2])
    if w and fq_deadline(deadlines, w) >= now then
      return w
    end
    redis.call('ZREM', queue, p[1])
    redis.call('HDEL', deadlines, p[1])
  end
end

-- fq_give hands the lock to waiter w (direct handoff) and tells it. s is the lock's value: held by
-- the owner whose last hold is being given up, or free; nil when the key is missing. The new value
-- is what lk_take would write for w — the next fence (never below the clock: us, the server's
-- clock in µs), w's hold and label — and the chain of owner releases (BASE) goes on (a new one
-- starts on a missing key). The lease is w's TTL, but at most its queue TIMEOUT: a waiter that
-- died while queued keeps the lock no longer than it would have kept its place in the queue, and
-- a live one's watchdog lengthens the lease to its TTL within a third of that (core/handoff.go). The message names w by the SHA-1 of its token (never the token)
-- and its queueing by EPOCH, so that a waiter can tell a grant of its current queueing from an
-- old one. Returns the fence.
local function fq_give(key, s, w, us, pub)
  local f, acq = lk_fence(s and s.f, us)
  local n = {tok = w.tok, f = f, holds = w.hold, w = s and s.w or '0',
    rel = s and s.rel or string.format('%.0f', f - 10000000), acq = acq, label = w.label, extra = ''}
  local px = tonumber(w.ttl)
  if w.timeout < px then px = w.timeout end
  redis.call('SET', key, lk_enc(n), 'PX', px)
  redis.call(pub, key .. ':released',
    'g:' .. redis.sha1hex(w.tok) .. ':' .. string.format('%.0f', f) .. ':' .. string.format('%.0f', w.epoch))
  return f
end

-- fq_wait queues member m (at the tail, EPOCH us) or, if it is queued already, refreshes its
-- deadline to now + timeout; the queue's keys outlive the deadline. It returns what acquire answers
-- to a queued caller: {-1 - wait, 'queued', EPOCH}.
local function fq_wait(queue, deadlines, m, us, timeout, wait)
  local score = us * 2
  if redis.call('ZADD', queue, 'NX', string.format('%.0f', score), m) == 0 then
    score = tonumber(redis.call('ZSCORE', queue, m))
    if score % 2 == 0 then
      score = score + 1
      redis.call('ZADD', queue, 'XX', string.format('%.0f', score), m)
    end
    redis.call('HSET', deadlines, m, string.format('%.0f', math.floor(us / 1000) + timeout))
    keep(deadlines, timeout)
  end
  keep(queue, timeout)
  if wait < 0 then
    wait = 0
  end
  return {-1 - wait, 'queued', math.floor(score / 2)}
end
