-- Take every lock of a set for one owner, or none (AcquireAll): one attempt on the names of one
-- slot, atomically. A lock held by another owner stops it before anything is taken.
--! keys: locks...
--! args: token ttl hold label waiting
-- waiting: as acquire.lua's (1: flag the taken lock so that its release publishes).
-- Returns {fence, ...}, one per key in order, when every lock was free (or missing) and is now the
-- token's (a lock the token already holds with this hold, a replay, keeps its fence), or
-- {'busy', i, pttl}: the i-th lock (1-based) is held by another owner for pttl ms more, and
-- nothing was taken.
--! include lock.lua
local found = {}
for i, key in ipairs(k_locks) do
  local s = lk_live(key, lk_get(key))
  if s and s.tok ~= '' and not (s.tok == a_token and lk_has(s.holds, a_hold)) then
    return {'busy', i, -1 - lk_busy(key, s, a_waiting)}
  end
  found[i] = s or false
end
local fences = {}
for i, key in ipairs(k_locks) do
  local s = found[i]
  if s and s.tok == a_token then
    fences[i] = s.f -- a replay of this attempt: already the token's
  else
    fences[i] = lk_take(key, s or nil, a_token, a_hold, a_ttl, nil, a_label, a_waiting)
  end
end
return fences
