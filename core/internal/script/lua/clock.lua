-- The server's clock, read at most once per script run into clock_t: by now() below, or by the
-- fence rule (fence_rule.lua), the only other place that reads TIME. Fences, queue epochs,
-- waiters' deadlines, leases and the ACQUIRED field all count on it.
local clock_t

-- now returns the server's clock in µs and in ms, and TIME's reply {seconds, microseconds}.
local function now()
  if not clock_t then
    clock_t = redis.call('TIME')
  end
  local us = clock_t[1] * 1000000 + clock_t[2]
  return us, math.floor(us / 1000), clock_t
end

-- int formats a whole number (fences and clocks reach 1.8e15: never in exponent notation). '%d'
-- (Lua 5.1: a C long) is exact for whole numbers up to 2^53 and costs a fraction of '%.0f', whose
-- float formatting was the largest single cost of an uncontended acquisition.
local function int(x)
  return string.format('%d', x)
end
