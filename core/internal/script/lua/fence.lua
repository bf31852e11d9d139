-- The fence function, for locks and permits alike.
--! include clock.lua

-- next_fence returns the fence of a fresh acquisition of a name whose last fence is prev (nil when
-- this server knows none): prev + 1, but never below a clock in µs, so that fences keep increasing
-- after the name's keys expired, a restart without persistence or a failover that lost or turned
-- back the last writes. The clock is the server's, or the floor the client passes (Redlock: its
-- clock in ms × 1000, one floor for every node, so that the nodes agree); a server that knows no
-- fence for the name reads its own clock too, so a client clock that runs behind cannot take
-- fences back. It also returns when the acquisition happened, for the ACQUIRED field: the
-- server's clock "SECONDS.MICROSECONDS" when it read it, else the floor in ms.
local function next_fence(prev, floorArg)
  local f, us, at, rcall = nil, nil, nil, redis.call
--! inline fence_rule.lua
  return f, at or clock_t[1] .. '.' .. clock_t[2]
end
