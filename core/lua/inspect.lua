#!lua flags=no-writes
-- Read-only: what Client.Inspect reports about a name's lock and semaphore, in one round trip. It
-- writes nothing and changes no TTL: flagged no-writes (Redis refuses it any write) and sent with
-- EVALSHA_RO, so that a user with read-only access to the keys (%R~) can run it.
-- (lib.lua, lock_lib.lua and fair_lib.lua first; the loader puts the flags line before them.)
-- KEYS[1] lock, KEYS[2] the semaphore's fence counter, KEYS[3] the lock's fair queue (ZSET),
-- KEYS[4] permits (ZSET token -> lease expiry), KEYS[5] permit limits (ZSET token -> limit),
-- KEYS[6] permit fences (HASH token -> fence, token NUL -> holder label), KEYS[7] the semaphore's
-- fair-queue deadlines (hash token -> ms), KEYS[8] the lock's fair-queue deadlines
-- Returns {the lock's value ('' if none; see lock_lib.lua), its PTTL, the fence counter ('' if none), live fair waiters,
-- the server's clock in ms, the live permits as a flat list of token, lease expiry, limit, fence,
-- label (5 entries each, earliest expiry first), live fair permit waiters}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function live(deadlines)
  local n = 0
  for _, dl in ipairs(redis.call('HVALS', deadlines)) do
    if tonumber(dl) >= now then n = n + 1 end
  end
  return n
end
-- live_fair counts the live waiters of the lock's fair queue.
local function live_fair(queue, deadlines)
  local n = 0
  local all = redis.call('ZRANGE', queue, 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local w = fq_parse(all[i], all[i + 1])
    if w and fq_deadline(deadlines, w) >= now then n = n + 1 end
  end
  return n
end
local permits = {}
local leases = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #leases, 2 do
  local tok = leases[i]
  local meta = redis.call('HMGET', KEYS[6], tok, tok .. '\0')
  permits[#permits + 1] = tok
  permits[#permits + 1] = leases[i + 1]
  permits[#permits + 1] = redis.call('ZSCORE', KEYS[5], tok) or '0'
  permits[#permits + 1] = meta[1] or '0'
  permits[#permits + 1] = meta[2] or ''
end
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '',
  live_fair(KEYS[3], KEYS[8]), now, permits, live(KEYS[7])}
