-- Acquire a lock, re-enter it, or report how long it stays taken; behind a guard when one is given.
-- One round trip; GET + TIME + SET when it is free.
--! keys: lock guard?
--! args: token ttl label waiting? hold? floor? entry?
-- guard: a key with the lock's hash tag (a stored result, a completion marker): while it exists,
-- nothing is taken and its value is returned. waiting: nil, '' or 0 (TryAcquire), 1 (a waiting
-- call: flag a taken lock so that its release publishes), 2 (a call that waited: keep the flag
-- when it takes the lock, for the waiters behind it). hold: the hold id, nil for '0' (a fresh
-- token's first hold). floor: the client's fence floor in µs (Redlock), nil or '' for none. entry
-- (a re-entry only): the fence of the acquisition re-entered, or 0 for any acquisition of the
-- token (lk_entry: a re-entry never takes a lock). The client leaves out trailing defaults (no
-- entry, no floor, hold '0', waiting 0): each argument costs Redis a Lua string (about 700
-- instructions) and a parsed one.
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
a_hold = a_hold or '0' -- left out when it is a fresh token's first hold
local rcall = redis.call -- a global costs Redis about 270 instructions: read once for two calls
local v = rcall('GET', k_lock)
if not k_guard and not a_entry and (not v or v:byte(1) == 2) then
  -- A free lock is \2 BASE NUL FENCE, BASE on 16 digits (lock.lua): FENCE starts at byte 19, and
  -- the value goes into the held one whole, BASE and all: no find, and no sub but FENCE's (each
  -- string function call and each new string cost Redis hundreds of instructions; a pattern match
  -- costs more than the calls it would replace). (+ 0 converts once, tonumber twice; a FENCE that
  -- is no number, which no lockkit writes, raises an error here as in lk_parse.)
  local prev, floorArg, clock_t, f, us, at = v and v:sub(19) + 0, a_floor, nil, nil, nil, nil
--! inline fence_rule.lua
  local b1, b2, b3 = v, '', '' -- \2 BASE NUL PREV: the free value taken
  if not v then -- a new chain of owner releases (lock.lua, lk_held), no PREV
    local base = f - 10000000
    if base > 9000000000000000 then -- 16 digits (lock.lua, lk_base)
      base = 9000000000000000
    end
    b1, b2, b3 = '\2', string.format('%016d', base), '\0'
  end
  -- FENCE and ACQUIRED in pieces, joined by the value's one concatenation (a string of its own
  -- costs Redis about 700 instructions, string.format 1,900): the clock's, SECONDS.MICROSECONDS,
  -- and, when the fence is the clock (the common case), its digits: SECONDS, then MICROSECONDS
  -- on six digits.
  local fd, fz, fu, a1, a2, a3 = nil, '', '', at, '', ''
  if us then
    a1, a2, a3 = clock_t[1], '.', clock_t[2]
  end
  if f == us then
    fd, fu = a1, a3
    local n = #fu
    if n < 6 then -- the zeros as constants: a string made for them once in 1,000 only
      fz = n == 5 and '0' or n == 4 and '00' or ('00000'):sub(n)
    end
  else
    fd = string.format('%d', f)
  end
  -- TOKEN FENCE HOLDS W \2 BASE PREV ACQUIRED LABEL
  rcall('SET', k_lock, a_token .. '\0' .. fd .. fz .. fu .. '\0' .. a_hold .. (a_waiting == '2' and '\0001' or '\0000') ..
    b1 .. b2 .. b3 .. '\0' .. a1 .. a2 .. a3 .. '\0' .. a_label, 'PX', a_ttl)
  return f
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
