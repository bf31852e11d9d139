-- Owner-checked renewal of many locks in one call (the watchdog's batches): renew.lua's renewal of
-- each key, with the key's own owner check and the call's TTL, so that a batch of renewals costs
-- Redis one script call (not one per lock). One key's outcome never touches another's. GET per
-- key (not MGET): the commands renew.lua runs, which a lockkit user's ACL grants.
--! keys: locks...
--! args: items...
-- items: the TTL, then per key, in the keys' order, what its value starts with while the
-- acquisition holds it: TOKEN NUL, then FENCE NUL when the check is fenced (renew.lua's prefix,
-- built by the client). One list, so that the script reads ARGV in place.
-- Returns the number of keys when every one was renewed; otherwise one reply per key, in order:
-- 1 when renewed, 0 when its token does not hold that lock, or the error reading the key gave (a
-- key of another type, as renew.lua's GET): that key's renewal fails, alone.
local rcall, rpcall, find = redis.call, redis.pcall, string.find
local ttl, out = a_items[1], nil
for i = 1, #k_locks do
  local key = k_locks[i]
  local v, r = rpcall('GET', key), 0
  if type(v) == 'string' and find(v, a_items[i + 1], 1, true) == 1 then -- v starts with it
    rcall('PEXPIRE', key, ttl, 'GT')
    r = 1
  elseif type(v) == 'table' then
    r = v
  end
  if out then
    out[i] = r
  elseif r ~= 1 then -- the first key not renewed: the keys before it were
    out = {}
    for j = 1, i - 1 do
      out[j] = 1
    end
    out[i] = r
  end
end
return out or #k_locks
