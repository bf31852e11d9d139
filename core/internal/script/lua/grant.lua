-- Grants: a release (or a waiter that gives up a grant) hands the lock or a freed permit to the
-- first live waiter of the queue (queue.lua) inside the script, as the waiter's own acquisition
-- would, and tells it on the release channel: "g:" SHA1(TOKEN) ":" FENCE ":" EPOCH. The waiter's
-- client wakes it with the grant and it holds without another round trip, counting its lease from
-- its last attempt (core/grant.go). The message names the waiter by the SHA-1 of its token (never
-- the token) and its queueing by EPOCH, so that a waiter can tell a grant of its current queueing
-- from an old one.
--! include clock.lua

local function grant_tell(pub, channel, w, f)
  redis.call(pub, channel, 'g:' .. redis.sha1hex(w.tok) .. ':' .. int(f) .. ':' .. int(w.epoch))
end
