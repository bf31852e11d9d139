-- The hot path of acquire.lua, first in the script so that nothing else is defined when it
-- returns: a free (or missing) lock is taken with GET + TIME + SET (GET + SET over Redlock, whose
-- clients pass a fence floor) and as few Lua strings as possible. Anything else (a lock held by
-- someone, a re-entry) falls through to acquire.lua, with the value already read in v. A re-entry
-- (ARGV[7] given) never takes a free lock: it falls through too.
-- (Keys and arguments: see acquire.lua; the value's layout: see lock_lib.lua.)
local v = redis.call('GET', KEYS[1])
if not ARGV[7] and (not v or v:byte(1) == 0) then
  local prev, base = 0, ''
  if v then
    local p = v:find('\0', 2, true)
    if p then
      prev, base = tonumber(v:sub(2, p - 1)), v:sub(p + 1)
    else
      prev = nil
    end
  end
  if prev then
    -- The fence: prev + 1, never below a clock in µs (see lk_fence): the client's floor when this
    -- node has the name's fence, else (also) the server's.
    local floor = tonumber(ARGV[5])
    local us, f, acq
    if floor and v then
      us, acq = floor, ARGV[5]:sub(1, -4)
    else
      local t = redis.call('TIME')
      us, acq = t[1] * 1000000 + t[2], t[1] .. '.' .. t[2]
      f = t[1] .. ('00000' .. t[2]):sub(-6)
      if floor and floor > us then us, f = floor, nil end
    end
    if prev >= us then us, f = prev + 1, nil end
    f = f or string.format('%.0f', us)
    if not v then base = string.format('%.0f', us - 10000000) end -- a new chain (see BASE in lock_lib.lua)
    redis.call('SET', KEYS[1], ARGV[1] .. '\0' .. f .. '\0' .. ARGV[3] .. (ARGV[6] == '2' and '\0001\0' or '\0000\0') ..
      base .. '\0' .. acq .. '\0' .. ARGV[4], 'PX', ARGV[2])
    return us
  end
end
