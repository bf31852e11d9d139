-- Owner-checked release of one hold. On the owner's last hold deletes the lock and publishes the
-- releasing client's id on the release channel (the lock key + ':released', same slot). Safe to
-- replay (see drop in lib.lua, loaded first).
-- KEYS[1] lock hash, KEYS[2] release receipt
-- ARGV[1] owner token, ARGV[2] publish command (PUBLISH, or SPUBLISH on a cluster), ARGV[3] message,
-- ARGV[4] hold id
-- Returns: -1 when the token does not hold the lock (nothing touched), else the holds left.
local holds = drop(KEYS[1], KEYS[2], ARGV[1], ARGV[4])
if holds then
  return holds
end
redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[3])
return 0
