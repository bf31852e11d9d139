-- An operator's forced release (Client.ForceRelease): deletes the name's lock whoever holds it and
-- every permit of its semaphore, and wakes waiters: the lock's first live fair waiter (named by the
-- SHA-1 of its token: its next attempt takes the free lock; fair_lib.lua) or else one waiter of
-- each client, and one permit waiter per freed permit (at most 1000). The lock becomes free but
-- keeps its fence, and breaks its chain of owner releases (BASE, see lock_lib.lua), so the
-- holder's next renewal reports the loss and its own release answers "not held". (lib.lua,
-- lock_lib.lua and fair_lib.lua first.)
-- KEYS[1] lock, KEYS[2] fair queue (ZSET), KEYS[3] fair-queue deadlines, KEYS[4] permits,
-- KEYS[5] permit limits, KEYS[6] permit fences, KEYS[7] the semaphore's fair queue, KEYS[8] its
-- deadlines
-- ARGV[1] publish command (PUBLISH or SPUBLISH), ARGV[2] message for non-fair waiters
-- Returns the number of holds deleted: 1 for the lock, plus one per live permit.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
local s = lk_get(KEYS[1])
if s and s.tok ~= '' then
  redis.call('SET', KEYS[1], lk_enc(lk_free(s.f, string.format('%.0f', s.f + 1))), 'PX', FREE_TTL)
  n = 1
  local w = fq_head(KEYS[2], KEYS[3], now)
  redis.call(ARGV[1], KEYS[1] .. ':released', w and redis.sha1hex(w.tok) or ARGV[2])
end
local freed = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
if freed == 0 then
  return n
end
-- The first live fair waiters may take the freed permits: name each of them, as releases do; a
-- semaphore without fair waiters gets one client message per freed permit.
next_waiter(KEYS[7], KEYS[8])
local queue = redis.call('LRANGE', KEYS[7], 0, math.min(freed, 1000) - 1)
for i = 1, math.min(freed, 1000) do
  local msg = ARGV[2]
  if #queue > 0 then
    msg = queue[i] and redis.sha1hex(queue[i]) or ''
  end
  redis.call(ARGV[1], KEYS[4] .. ':released', msg)
end
return n + freed
