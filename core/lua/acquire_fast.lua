-- The hot path of acquire.lua, first in the script so that nothing else is defined when it
-- returns: a free (or missing) lock is taken with GET + TIME + SET and as few Lua strings as
-- possible. Anything else (a lock held by someone, a re-entry, a Redlock fence floor) falls
-- through to acquire.lua, with the value already read in v.
-- (Keys and arguments: see acquire.lua; the value's layout: see lock_lib.lua.)
local v = redis.call('GET', KEYS[1])
if ARGV[5] == '' and (not v or v:byte(1) == 0) then
  local prev, rel = 0, ''
  if v then
    local p = v:find('\0', 2, true)
    if p then
      prev, rel = tonumber(v:sub(2, p - 1)), v:sub(p + 1)
    else
      prev = nil
    end
  end
  if prev then
    -- The fence: the server's clock in µs, or prev + 1 if that is not above prev (see lk_fence).
    local t = redis.call('TIME')
    local us, f = t[1] * 1000000 + t[2], nil
    if prev >= us then
      us = prev + 1
      f = string.format('%.0f', us)
    else
      f = t[1] .. ('00000' .. t[2]):sub(-6)
    end
    if not v then rel = f end -- a new chain starts here (see BASE in lock_lib.lua)
    redis.call('SET', KEYS[1], ARGV[1] .. '\0' .. f .. '\0' .. ARGV[3] .. (ARGV[6] == '2' and '\0001\0' or '\0000\0') ..
      rel .. '\0' .. t[1] .. '.' .. t[2] .. '\0' .. ARGV[4], 'PX', ARGV[2])
    return us
  end
end
