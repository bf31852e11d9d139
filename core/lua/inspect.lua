-- Read-only: what Client.Inspect reports about a lock, in one round trip. It writes nothing and
-- changes no TTL.
-- KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] fair-queue deadlines (hash token -> ms)
-- Returns {the lock hash as HGETALL, its PTTL, the fence counter ('' if none), live fair waiters,
-- the server's clock in ms}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queued = 0
for _, dl in ipairs(redis.call('HVALS', KEYS[3])) do
  if tonumber(dl) >= now then queued = queued + 1 end
end
return {redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', queued, now}
