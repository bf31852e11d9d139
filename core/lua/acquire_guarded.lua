-- acquire.lua behind a guard: if the guard key exists (a stored result, a completion marker), return
-- its value and take nothing. Same slot as the lock: the guard key carries the lock's hash tag.
-- (lib.lua first.)
-- KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] guard key
-- ARGV[1] owner token, ARGV[2] TTL in milliseconds, ARGV[3] hold id, ARGV[4] holder label,
-- ARGV[5] optional fence floor
-- Returns as acquire.lua, or {'guarded', value} when the guard key exists.
local g = redis.call('GET', KEYS[3])
if g then
  return {'guarded', g}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return take(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[4])
end
return reenter(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2]) or busy(KEYS[1])
