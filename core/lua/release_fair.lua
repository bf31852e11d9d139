-- Owner-checked release of a lock taken in fair mode: as release.lua, but the message names the
-- live waiter at the head of the queue, so that only its process wakes a waiter.
-- KEYS[1] lock hash, KEYS[2] fence counter (unused), KEYS[3] queue (list), KEYS[4] deadlines (hash)
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH or SPUBLISH)
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local holds = redis.call('HGET', KEYS[1], ARGV[1])
if not holds then
  return -1
end
holds = tonumber(holds) - 1
if holds > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], holds)
  return holds
end
redis.call('DEL', KEYS[1])
local nxt = redis.call('LINDEX', KEYS[3], 0)
if nxt then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  while nxt do
    local dl = tonumber(redis.call('HGET', KEYS[4], nxt) or '0')
    if dl >= now then break end
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], nxt)
    nxt = redis.call('LINDEX', KEYS[3], 0)
  end
end
redis.call(ARGV[2], KEYS[1] .. ':released', nxt or '')
return 0
