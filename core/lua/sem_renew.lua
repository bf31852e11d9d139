-- Owner-checked renewal of a permit's lease (also Extend): its expiry becomes now + TTL unless it is
-- already later (renewals never shorten a lease), and the semaphore's keys live at least as long.
-- (lib.lua and sem_lib.lua first.)
-- KEYS[1] permits, KEYS[2] limits, KEYS[3] fences; ARGV[1] token, ARGV[2] TTL in ms
-- Returns 1 when renewed, 0 when the token holds no live permit.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = sem_now()
if not s or tonumber(s) <= now then
  return 0
end
local until_ms = now + tonumber(ARGV[2])
if until_ms > tonumber(s) then
  redis.call('ZADD', KEYS[1], 'XX', until_ms, ARGV[1])
else
  until_ms = tonumber(s)
end
for i = 1, 3 do
  keep(KEYS[i], until_ms - now)
end
return 1
