-- The lock's value, shared by the lock scripts. A lock is ONE string key, so that taking it is
-- GET + TIME + SET and releasing it GET + SET: seven commands per uncontended lock and unlock,
-- scripts included. docs/keys.md ("The lock's value") documents its fields:
--
--   held:  TOKEN  FENCE  HOLDS  W  \2 BASE  PREV  ACQUIRED  LABEL  [NUL EXTRA]
--   free:  \2 BASE  FENCE
--
-- separated by NUL bytes, but for the byte 2 before BASE, which starts a free value, and BASE
-- always has 16 digits (lk_base): the free value an acquisition takes, \2 BASE NUL FENCE, goes
-- into its held value whole (FENCE becomes PREV: what the acquisition was taken from, empty when
-- the key was missing), and its release writes \2 BASE NUL, an 18-byte piece of the held value,
-- and the fence: no field is looked for nor cut out of the value on either hot path but the fence
-- a free value ends with (each Lua string and each string function call costs Redis hundreds of
-- instructions; acquire.lua, release.lua). Tokens, hold ids and labels contain no NUL byte and hold
-- ids no space (the client makes sure). A held lock lives for its TTL (renewals and re-entries
-- only lengthen it); a free one for FREE_TTL, which keeps its fence and its chain of owner
-- releases (BASE), then disappears. The free value of the previous version, NUL FENCE NUL BASE, is
-- still read (lk_parse); its held value is not (a client of each version fails on the other's
-- held value).
--
-- The byte 2 before BASE is the key schema: the first byte of a free value, the byte after W in a
-- held one. Every schema keeps it there, after TOKEN, FENCE, HOLDS and W, and a layout that a
-- client of this schema would misread writes another byte (3 to 31), so that each version tells
-- the other's value from its own and refuses it by its number (lk_schema); schema 1 had NUL there.
--
-- One name, one lock: the same key says when the name's other kinds of hold have it. While
-- permits (Permits) or reads and writes (Read, Write) of the name are held, TOKEN is their family's
-- mark, a byte 1 and the family ('\1permits', '\1rw': the suffix of its leases' key), which no
-- owner token can be (the client refuses a token that starts with a control byte); FENCE is the
-- last fence the family handed out (the name has one sequence), HOLDS, ACQUIRED and LABEL are
-- empty; the key lives at least as long as the family's longest lease (sem.lua). W is '1' once a
-- lock's waiter found the name taken, '2' once a waiter of another kind did: a release then
-- publishes on the lock's channel, and with '2' on the families' channels too (lk_tell).
--! include fence.lua

local FREE_TTL = '10000' -- a string: redis.call formats a number argument with '%.17g'

-- lk_schema raises the error for a value these scripts cannot read: of another key schema (the
-- first byte of a free value, the byte after W in a held one: 0 for schema 1), which it names, or
-- no lockkit value. (Only ever on the error path: the hot paths read no schema.)
local function lk_schema(v)
  local b = v:byte(1)
  if b == nil or b > 31 or b == 1 then -- held: the byte after TOKEN, FENCE, HOLDS and W
    local after = string.match(v, '^[^%z]+%z[^%z]*%z[^%z]*%z[^%z](.)')
    b = after and after:byte()
  end
  if b == 0 then
    b = 1
  end
  if b and b < 32 and b ~= 2 then
    error(string.format('lockkit: the lock key holds a value of key schema %d, this lockkit reads and writes key ' ..
      'schema 2: a client of another lockkit version holds or held the name (CHANGELOG, "Key schema")', b))
  end
  error('lockkit: unexpected lock value (none of the layouts lockkit writes: a key of another program?)')
end

local function lk_parse(v)
  local s
  local b = v:byte(1)
  if b == 2 or b == 0 then
    local rel, f
    if b == 2 then
      rel, f = string.match(v, '^\2([^%z]*)%z(%d+)$')
    else -- the previous version's free value
      f, rel = string.match(v, '^%z(%d+)%z([^%z]*)$')
    end
    s = {tok = '', f = tonumber(f), holds = '', w = '0', rel = rel, prev = '', acq = '', label = '', extra = ''}
  else
    local tok, f, holds, w, rel, prev, acq, label, extra = string.match(v,
      '^([^%z]+)%z(%d+)%z([^%z]*)%z([012])\2([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)(.*)$')
    s = {tok = tok, f = tonumber(f), holds = holds, w = w, rel = rel, prev = prev, acq = acq, label = label,
      extra = extra}
  end
  if not s.f then
    lk_schema(v)
  end
  return s
end

-- lk_get returns the lock's parsed value, or nil when the key does not exist.
local function lk_get(key)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  return lk_parse(v)
end

-- lk_base is BASE as the value keeps it: on 16 digits, so that the hot paths find what follows it
-- without looking (a sign takes one: '%016d'). A chain that starts after 9e15 (fences beyond 2255's
-- clock) starts there, as one without a start (an older value's empty BASE) does: a release it
-- holds a fence of answers not held rather than released (lk_drop).
local function lk_base(rel)
  local n = tonumber(rel)
  if not n or n > 9000000000000000 then
    n = 9000000000000000
  end
  return string.format('%016d', n)
end

local function lk_enc(s)
  if s.tok == '' then
    return '\2' .. lk_base(s.rel) .. '\0' .. int(s.f)
  end
  return table.concat({s.tok, int(s.f), s.holds, s.w .. '\2' .. lk_base(s.rel), s.prev or '', s.acq, s.label},
    '\0') .. s.extra
end

-- lk_free is the value of a free lock.
local function lk_free(f, rel)
  return {tok = '', f = f, holds = '', w = '0', rel = rel, prev = '', acq = '', label = '', extra = ''}
end

-- lk_keep rewrites the value and keeps the key's TTL.
local function lk_keep(key, s)
  redis.call('SET', key, lk_enc(s), 'KEEPTTL')
end

-- lk_held is the value of a lock taken for token with hold and label, after s (the free lock it
-- was taken from, or nil when the key was missing), with fence f taken at `at`. The chain of owner
-- releases goes on from s; on a missing key a new one starts 10 s before f: the key no longer
-- knows the acquisitions before it, and a release of one of them within its replay window
-- (go-redis retries for a few seconds) must still be recognized (see lk_drop).
local function lk_held(s, token, hold, label, f, at, w)
  return {tok = token, f = f, holds = hold, w = w, rel = s and s.rel or int(f - 10000000),
    prev = s and int(s.f) or '', acq = at, label = label or '', extra = ''}
end

-- lk_take takes the free (or missing: s nil) lock for token and returns the fence. waiting '2'
-- (a call that waited) keeps the release publishing, for the waiters behind it.
local function lk_take(key, s, token, hold, ttl, floorArg, label, waiting)
  local f, at = next_fence(s and s.f, floorArg)
  redis.call('SET', key, lk_enc(lk_held(s, token, hold, label, f, at, waiting == '2' and '1' or '0')), 'PX', ttl)
  return f
end

-- lk_has reports whether the space-separated list has item.
local function lk_has(list, item)
  return (' ' .. list .. ' '):find(' ' .. item .. ' ', 1, true) ~= nil
end

local function lk_count(list)
  if list == '' then
    return 0
  end
  local _, n = list:gsub(' ', '')
  return n + 1
end

-- lk_reenter adds hold to the holds of the owner's lock s, keeping the longer of the two TTLs,
-- and returns {fence, holds}. A replay of the call that took or re-entered with this hold changes
-- nothing but rewrites the value as it is, so that the replay's connection has a write for WAIT
-- to count (WithReplicaAck: the first call's write may not have reached the replicas).
local function lk_reenter(key, s, hold, ttl)
  if not lk_has(s.holds, hold) then
    s.holds = s.holds .. ' ' .. hold
  end
  lk_keep(key, s)
  redis.call('PEXPIRE', key, ttl, 'GT')
  return {s.f, lk_count(s.holds)}
end

-- lk_entry is a re-entry (through a lock's context, or WithOwner): it enters the acquisition the
-- token holds (of fence fenceArg, or any when it is '0') and answers as lk_reenter. It never takes
-- a lock: when the token holds no such acquisition (the lock expired, was deleted or
-- force-released, or another owner holds it) it answers {'nothold'}, and the holder that would
-- have been entered hears the same at its next renewal.
local function lk_entry(key, s, token, hold, ttl, fenceArg)
  if s and s.tok == token and (fenceArg == '0' or s.f == tonumber(fenceArg)) then
    return lk_reenter(key, s, hold, ttl)
  end
  return {'nothold'}
end

-- lk_busy returns -1 - the remaining TTL of a lock held by someone else, after flagging it for a
-- release message when the caller waits for one: flag '1' for a lock's waiter (the default), '2'
-- for a waiter of another kind (permits, reads, writes), which listens on its family's channel.
local function lk_busy(key, s, waiting, flag)
  flag = flag or '1'
  if waiting ~= '' and waiting ~= '0' and s.w ~= flag and s.w ~= '2' then
    s.w = flag
    lk_keep(key, s)
  end
  local pttl = redis.call('PTTL', key)
  if pttl < 0 then
    pttl = 0
  end
  return -1 - pttl
end

-- lk_drop removes hold from token's holds. It returns the holds left, or -1 when token does not
-- hold the lock, and nil when the lock is now free (the caller tells the waiters when s.w is 1).
-- A release of a lock no longer its own answers 0 (released) when its fence is in the key's chain
-- of owner releases (BASE <= its fence <= FENCE): its acquisition was released by its owner, so
-- this is a release that go-redis replayed because its first reply was lost, whatever acquisitions
-- came after it. Otherwise (the lock expired, was deleted, or taken by ForceRelease) it answers -1,
-- and -2 when the key is missing: the chain went with it, so a replayed release cannot tell its
-- own earlier run (followed by a holder whose key expired) from a loss; the client can (it knows
-- whether it sent the release more than once, and the hold's validity).
local function lk_drop(key, s, token, hold, fenceArg)
  local mine = tonumber(fenceArg or '')
  if mine == 0 then
    mine = nil -- a give-back: the fence is unknown
  end
  if not s then
    return -2
  end
  if s.tok ~= token then
    if mine and s.f >= mine and mine >= (tonumber(s.rel) or math.huge) then
      return 0
    end
    return -1
  end
  if not lk_has(s.holds, hold) then
    return lk_count(s.holds)
  end
  local left, dropped = {}, false
  for h in s.holds:gmatch('%S+') do
    if h == hold and not dropped then
      dropped = true
    else
      left[#left + 1] = h
    end
  end
  if #left > 0 then
    s.holds = table.concat(left, ' ')
    lk_keep(key, s)
    return #left
  end
  local f = mine or 0
  if f < s.f then
    f = s.f
  end
  redis.call('SET', key, lk_enc(lk_free(f, s.rel)), 'PX', FREE_TTL)
  return nil
end

-- lk_tell wakes the waiters of a name that became free, as its value's W says (nothing for '0'):
-- msg on the lock's release channel, and for '2' on its families' channels too.
local function lk_tell(pub, key, w, msg)
  if w ~= '0' then
    redis.call(pub, key .. ':released', msg)
    if w == '2' then
      redis.call(pub, key .. ':permits:released', msg)
      redis.call(pub, key .. ':rw:released', msg)
    end
  end
end

-- lk_live returns s, the value of key, but a family's mark (see above) whose family holds no live
-- lease any more (its holders died) as a free value with its fence and BASE: nothing holds the
-- name. The family's expired leases are dropped by its next call (sem.lua).
local function lk_live(key, s)
  if s and s.tok:byte(1) == 1 then
    local _, ms = now()
    if redis.call('ZCOUNT', key .. ':' .. s.tok:sub(2), '(' .. ms, '+inf') == 0 then
      local free = lk_free(s.f, s.rel)
      free.w = s.w
      return free
    end
  end
  return s
end
