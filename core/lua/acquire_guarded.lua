-- acquire.lua behind a guard: if the guard key exists (a stored result, a completion marker), return
-- its value and take nothing. Same slot as the lock: the guard key carries the lock's hash tag.
-- (lib.lua and lock_lib.lua first.)
-- KEYS[1] lock, KEYS[2] (unused), KEYS[3] guard key
-- ARGV as acquire.lua
-- Returns as acquire.lua, or {'guarded', value} when the guard key exists.
local g = redis.call('GET', KEYS[3])
if g then
  return {'guarded', g}
end
local s = lk_get(KEYS[1])
if ARGV[7] then
  return lk_entry(KEYS[1], s, ARGV[1], ARGV[3], ARGV[2], ARGV[7])
end
if not s or s.tok == '' then
  return lk_take(KEYS[1], s, ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[4], ARGV[6])
end
if s.tok == ARGV[1] then
  return lk_reenter(KEYS[1], s, ARGV[3], ARGV[2])
end
return lk_busy(KEYS[1], s, ARGV[6] or '')
