-- A fair waiter gives up: it leaves the queue. If a release handed it the lock meanwhile (its grant
-- message came too late, or was lost), the waiter gives that hold up; and a lock left free goes to
-- the next live waiter of the queue, as a release would hand it on (or, if there is none, the
-- release message wakes a waiter of each client when a waiter flagged the lock). Safe to replay.
--! keys: lock queue deadlines
--! args: token pub hold ttl timeout label
-- ttl, timeout, label: what the waiter queued with (its queue member).
-- Returns 1 when the lock had been handed to the waiter, else 0.
--! include fair.lua
q_leave(k_queue, k_deadlines, q_member(a_ttl, a_timeout, a_token, a_hold, a_label))
local s = lk_live(k_lock, lk_get(k_lock))
local mine = s ~= nil and s.tok == a_token and lk_has(s.holds, a_hold)
if s and s.tok ~= '' and not mine then
  return 0 -- held by another owner (or other holds of the token): its release hands the lock on
end
if mine and s.holds ~= a_hold then
  lk_drop(k_lock, s, a_token, a_hold, '0') -- co-owners (WithOwner) hold it still
  return 1
end
local w = q_first(k_queue, k_deadlines, true)
if w then
  lk_give(k_lock, s, w, a_pub)
elseif mine then
  lk_drop(k_lock, s, a_token, a_hold, '0')
  lk_tell(a_pub, k_lock, s.w, '')
end
return mine and 1 or 0
