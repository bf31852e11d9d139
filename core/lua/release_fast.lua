-- The hot path of release.lua, first in the script so that nothing else is defined when it
-- returns: the owner's only hold, released with GET + SET (and PUBLISH when a waiter flagged the
-- lock) and as few Lua strings as possible: the value must start with the token, this
-- acquisition's fence and this hold as the only one. Anything else falls through to release.lua,
-- with the value already read in v.
-- (Keys and arguments: see release.lua; the value's layout: see lock_lib.lua.)
local v = redis.call('GET', KEYS[1])
local pre = ARGV[1] .. '\0' .. ARGV[5] .. '\0' .. ARGV[4] .. '\0'
if v and v:find(pre, 1, true) == 1 then
  local n = #pre -- then W, NUL, BASE, NUL
  local q = v:find('\0', n + 3, true)
  redis.call('SET', KEYS[1], '\0' .. ARGV[5] .. '\0' .. v:sub(n + 3, q - 1), 'PX', 10000)
  if v:byte(n + 1) == 49 then -- W is '1'
    redis.call(ARGV[2], KEYS[1] .. ':released', ARGV[3])
  end
  return 0
end
