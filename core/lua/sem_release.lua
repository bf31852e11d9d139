-- Owner-checked release of a permit. The freed permit goes straight to the live waiter at the head
-- of the queue (sem_handoff: its lease and fence are created here, and the message on the
-- semaphore's release channel — the permits key + ':released', same slot — names it and its
-- fence, so that it holds without another round trip). When no queued waiter can take it, one
-- waiter is woken instead, as before handoff: the message is the releasing client's id, or in fair
-- mode the SHA-1 of the queued waiter whose turn the freed permit is. Safe to replay: the receipt,
-- named after the permit's fence, remembers a release for 5s. (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences, KEYS[4] release receipt, KEYS[5] queue,
-- KEYS[6] deadlines, KEYS[7] waiters, KEYS[8] fence counter
-- ARGV[1] token, ARGV[2] publish command, ARGV[3] message, ARGV[4] '1' in fair mode
-- Returns 0 when released, -1 when the token holds no live permit (nothing published).
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    return 0
  end
  return -1
end
local own = redis.call('ZSCORE', KEYS[2], ARGV[1])
sem_drop(KEYS[1], KEYS[2], KEYS[3], {ARGV[1]})
local now = sem_now()
if tonumber(s) <= now then
  return -1 -- expired: the permit was free already
end
redis.call('SET', KEYS[4], 1, 'PX', 5000)
local channel = KEYS[1] .. ':released'
sem_reclaim(KEYS[1], KEYS[2], KEYS[3], now)
if sem_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[5], KEYS[6], KEYS[7], ARGV[2], channel, now) > 0 then
  return 0
end
local msg = ARGV[3]
if ARGV[4] == '1' then
  -- The waiters at positions 0 .. free-1 may take the free permits; earlier releases named the
  -- others already (a named waiter may not have taken its permit yet): name the last of them.
  local nxt = sem_next_waiter(KEYS[5], KEYS[6], KEYS[7], now)
  if nxt then
    local free = sem_room(KEYS[1], KEYS[2], own or '1')
    if free > 1 then
      nxt = redis.call('LINDEX', KEYS[5], free - 1) or nxt
    end
  end
  msg = nxt and redis.sha1hex(nxt) or ''
end
redis.call(ARGV[2], channel, msg)
return 0
