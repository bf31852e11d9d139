#!lua flags=no-writes
-- Owner-checked remaining lease of a permit (Lock.TTL); read-only as pttl.lua. (lib.lua and
-- sem_lib.lua first; the loader puts the flags line before them.)
-- KEYS[1] permits; ARGV[1] token
-- Returns the remaining lease in ms, or -3 when the token holds no live permit.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then
  return -3
end
local left = tonumber(s) - sem_now()
if left <= 0 then
  return -3
end
return left
