-- Acquire a lock, re-enter it, or report how long it stays taken; behind a guard when one is given.
-- One round trip; GET + TIME + SET when it is free.
--! keys: lock guard?
--! args: token ttl hold label waiting? floor? entry?
-- guard: a key with the lock's hash tag (a stored result, a completion marker): while it exists,
-- nothing is taken and its value is returned. waiting: nil, '' or 0 (TryAcquire), 1 (a waiting
-- call: flag a taken lock so that its release publishes), 2 (a call that waited: keep the flag
-- when it takes the lock, for the waiters behind it). floor: the client's fence floor in µs
-- (Redlock), nil or '' for none. entry (a re-entry only): the fence of the acquisition re-entered,
-- or 0 for any acquisition of the token (lk_entry: a re-entry never takes a lock). The client
-- leaves out trailing defaults (no entry, no floor, waiting 0): each argument costs Redis a Lua
-- string (about 700 instructions) and a parsed one.
-- Returns: fence (integer > 0) on a fresh acquisition,
--          {fence, holds} when the owner re-entered (or a replay found this hold recorded),
--          -1 - pttl (integer < 0) when another owner holds the lock, or another kind of hold
--            (permits, reads, a write: lock.lua) holds the name,
--          {'nothold'} when a re-entry finds no acquisition of the token to enter,
--          {'guarded', value} when the guard key exists.
-- The hot path, before the lock's functions are even defined (a closure costs Redis about 900
-- instructions per run): a free (or missing) lock is taken with as few Lua strings and calls as
-- possible, its fence made by the fence rule inlined. Anything else (a guard, a re-entry, a lock
-- held by someone, a value to parse) falls through, with the value already read in v.
local rcall = redis.call -- a global costs Redis about 270 instructions: read once for the hot path's three calls
local v = rcall('GET', k_lock)
if not k_guard and not a_entry and (not v or v:byte(1) == 0) then
  local prev, base = nil, ''
  local p = v and v:find('\0', 2, true)
  if p then -- a free lock: NUL FENCE NUL BASE (lock.lua). (+ 0 converts once, tonumber twice; a
    -- FENCE that is no number, which no lockkit writes, raises an error here as in lk_parse.)
    prev, base = v:sub(2, p - 1) + 0, v:sub(p + 1)
  end
  if prev or not v then
    local floorArg, clock_t, f, us, at = a_floor, nil, nil, nil, nil
--! inline fence_rule.lua
    if not v then
      base = string.format('%d', f - 10000000) -- a new chain of owner releases (lock.lua, lk_held)
    end
    -- FENCE and ACQUIRED in pieces, joined by the value's one concatenation (a string of its own
    -- costs Redis about 800 instructions, string.format 1,900): the clock's, SECONDS.MICROSECONDS,
    -- and, when the fence is the clock (the common case), its digits: SECONDS, then MICROSECONDS
    -- on six digits.
    local fd, fz, fu, a1, a2, a3 = nil, '', '', at, '', ''
    if us then
      a1, a2, a3 = clock_t[1], '.', clock_t[2]
    end
    if f == us then
      fd, fu = a1, a3
      if #fu < 6 then
        fz = ('00000'):sub(#fu)
      end
    else
      fd = string.format('%d', f)
    end
    rcall('SET', k_lock, a_token .. '\0' .. fd .. fz .. fu .. '\0' .. a_hold ..
      (a_waiting == '2' and '\0001\0' or '\0000\0') .. base .. '\0' .. a1 .. a2 .. a3 .. '\0' .. a_label, 'PX', a_ttl)
    return f
  end
end

--! include lock.lua
if k_guard then
  local g = redis.call('GET', k_guard)
  if g then
    return {'guarded', g}
  end
end
local s = lk_live(k_lock, v and lk_parse(v))
if a_entry then
  return lk_entry(k_lock, s, a_token, a_hold, a_ttl, a_entry)
end
if not s or s.tok == '' then
  return lk_take(k_lock, s, a_token, a_hold, a_ttl, a_floor, a_label, a_waiting)
end
if s.tok == a_token then
  return lk_reenter(k_lock, s, a_hold, a_ttl)
end
return lk_busy(k_lock, s, a_waiting or '')
