-- Fair acquire: like acquire.lua, but waiting callers queue in Redis, first come first served
-- (fair_lib.lua): a free lock goes to the first live waiter of the queue, and a release hands the
-- lock to it directly (direct handoff: the waiter learns from a grant message that it holds).
-- A caller that finds the lock held queues up, or refreshes its place if it is queued already.
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] queue (ZSET), KEYS[4] deadlines (HASH)
-- ARGV[1] owner token, ARGV[2] TTL in ms, ARGV[3] waiter timeout in ms (0: try without joining the
-- queue), ARGV[4] hold id, ARGV[5] holder label, ARGV[6] publish command (PUBLISH or SPUBLISH),
-- ARGV[7] (a re-entry only) the fence of the acquisition re-entered, or 0 for any (see lk_entry:
-- a re-entry neither takes the lock nor queues)
-- (lib.lua, lock_lib.lua and fair_lib.lua first.)
-- Returns as acquire.lua. A lock the caller's token holds with this hold already answers
-- {fence, holds} as a replay does: a release handed it to this waiter, whose grant message has not
-- arrived (or was lost); its TTL is lengthened to a full TTL from now, so that the caller may count
-- its lease from this attempt. A queued caller gets {-1 - wait, 'queued', EPOCH} (EPOCH names its
-- queueing in grants); wait is the holder's PTTL.
local s = lk_get(KEYS[1])
if ARGV[7] then
  return lk_entry(KEYS[1], s, ARGV[1], ARGV[4], ARGV[2], ARGV[7])
end
if s and s.tok == ARGV[1] then
  if lk_has(s.holds, ARGV[4]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
    return {s.f, lk_count(s.holds)}
  end
  return lk_reenter(KEYS[1], s, ARGV[4], ARGV[2])
end
local us, now = fq_now()
local timeout = tonumber(ARGV[3])
local m = fq_member(ARGV[2], ARGV[3], ARGV[1], ARGV[4], ARGV[5])
local wait
if s and s.tok ~= '' then
  if timeout <= 0 then
    return lk_busy(KEYS[1], s, '')
  end
  if s.w ~= '1' then
    -- A holder that took the lock without Fair releases without handing on: have its release
    -- publish, so that a waiter tries at once.
    s.w = '1'
    lk_keep(KEYS[1], s)
  end
  wait = redis.call('PTTL', KEYS[1])
else
  -- Free (a release that found no live waiter, an expiry, ForceRelease): the first live waiter
  -- takes it.
  local w = fq_pop(KEYS[3], KEYS[4], now)
  if not w or w.m == m then
    return lk_take(KEYS[1], s, ARGV[1], ARGV[4], ARGV[2], us, ARGV[5], '0')
  end
  fq_give(KEYS[1], s, w, us, ARGV[6])
  if w.tok == ARGV[1] then
    -- That waiter was another hold of the caller's token (WithOwner): the lock is the token's now.
    return lk_reenter(KEYS[1], lk_get(KEYS[1]), ARGV[4], ARGV[2])
  end
  wait = tonumber(w.ttl)
  if timeout <= 0 then
    return -1 - wait
  end
end
return fq_wait(KEYS[3], KEYS[4], m, us, timeout, wait)
