-- Owner-checked release of one hold: GET + SET. On the owner's last hold the lock becomes free (its
-- value keeps the fence for FREE_TTL) and, if a waiter flagged it, msg is published on the release
-- channel (the lock key + ':released', same slot). With a set key, value is written there for
-- value_ttl ms in the same step, only if the token still holds the lock with this hold (ReleaseSet:
-- a result, a completion marker). Safe to replay (lock.lua, lk_drop).
--! keys: lock set?
--! args: token fence msg hold? pub? value? value_ttl?
-- fence: the acquisition's (0: unknown, a give-back). hold: the hold id, nil for '0' (a fresh
-- token's first hold). pub: SPUBLISH on a cluster, else PUBLISH (nil). The client leaves out the
-- trailing defaults: each argument costs Redis a Lua string (about 700 instructions) and a parsed
-- one.
-- Returns: -1 when the token does not hold the lock (nothing touched), -2 when the key is missing
-- (lk_drop), else the holds left.

-- The hot path, before the lock's functions are even defined: the owner's only hold, released with
-- as few Lua strings and calls as possible. The value must start with the token, this
-- acquisition's fence and this hold as the only one, then W, \2 BASE NUL (lock.lua): that piece,
-- 18 bytes (BASE has 16 digits), and the fence are the free value. W is '0' when nobody waits
-- (the uncontended case): it is in the prefix looked for, which saves reading it (string.byte, a
-- C call: about 800 instructions per run, `make server-instructions`). Anything else falls through, with the value already read in
-- v.
a_hold = a_hold or '0' -- left out when it is a fresh token's first hold
local rcall = redis.call -- a global costs Redis about 270 instructions: read once for two calls
local v = rcall('GET', k_lock)
if not k_set and v then
  local pre = a_token .. '\0' .. a_fence .. '\0' .. a_hold .. '\0000\2'
  local n = #pre
  if v:find(pre, 1, true) == 1 then -- W is '0': nothing to publish
    rcall('SET', k_lock, v:sub(n, n + 17) .. a_fence, 'PX', '10000')
    return 0
  end
  n = n - 2 -- W is '1' (a waiter of the lock) or '2' (of another kind too: lock.lua, lk_tell)
  if v:find(pre:sub(1, n), 1, true) == 1 and v:byte(n + 2) == 2 then
    rcall('SET', k_lock, v:sub(n + 2, n + 19) .. a_fence, 'PX', '10000')
    local w, pub = v:byte(n + 1), a_pub or 'PUBLISH'
    redis.call(pub, k_lock .. ':released', a_msg)
    if w == 50 then
      redis.call(pub, k_lock .. ':permits:released', a_msg)
      redis.call(pub, k_lock .. ':rw:released', a_msg)
    end
    return 0
  end
end

--! include lock.lua
local s = v and lk_parse(v)
if k_set and s and s.tok == a_token and lk_has(s.holds, a_hold) then
  redis.call('SET', k_set, a_value, 'PX', a_value_ttl)
end
local holds = lk_drop(k_lock, s, a_token, a_hold, a_fence)
if holds then
  return holds
end
lk_tell(a_pub or 'PUBLISH', k_lock, s.w, a_msg)
return 0
