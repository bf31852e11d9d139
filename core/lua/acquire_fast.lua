-- The hot path of acquire.lua, first in the script so that nothing else is defined when it
-- returns: a free lock is taken with GET + SET, a missing one with GET + TIME + SET, with as few
-- Lua strings as possible. Anything else (a lock held by someone, a re-entry) falls through to
-- acquire.lua, with the value already read in v.
-- (Keys and arguments: see acquire.lua; the value's layout: see lock_lib.lua.)
local v = redis.call('GET', KEYS[1])
if not v or v:byte(1) == 0 then
  local p = v and v:find('\0', 2, true)
  local prev = p and tonumber(v:sub(2, p - 1))
  if not v or prev then
    local floor = tonumber(ARGV[5])
    local f, acq, tail
    if prev then
      -- The key keeps the name's last fence: this one is the next (never below the client's
      -- floor over Redlock), with no clock to read (see lk_fence for why that is enough).
      f = prev + 1
      acq = floor and ARGV[5]:sub(1, -4) or ARGV[7] or ''
      tail = v:sub(p) -- NUL BASE: the chain goes on
    else
      local t = redis.call('TIME')
      f = t[1] * 1000000 + t[2]
      acq = t[1] .. '.' .. t[2]
      tail = '\0' .. string.format('%.0f', f - 10000000) -- a new chain (see BASE in lock_lib.lua)
    end
    if floor and floor > f then f = floor end
    redis.call('SET', KEYS[1], ARGV[1] .. '\0' .. string.format('%.0f', f) .. '\0' .. ARGV[3] ..
      (ARGV[6] == '2' and '\0001' or '\0000') .. tail .. '\0' .. acq .. '\0' .. ARGV[4], 'PX', ARGV[2])
    return f
  end
end
