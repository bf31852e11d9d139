-- The fence rule, the one definition of how a fence is made (next_fence, fence.lua, says why),
-- written where it is inlined: in next_fence and in the acquire script's hot path, which creates no
-- closure before it returns (a closure costs Redis about 900 instructions per run; `make
-- server-instructions`). Reads prev (the name's last fence, a number, or nil when this server
-- knows none), floorArg (the client's floor in µs, a string; '' or nil for none) and clock_t
-- (clock.lua: TIME's reply once read this run, else nil: TIME is read at most once per run) and
-- rcall (redis.call, read into a local once: a global costs Redis about 270 instructions). Sets
-- f (the fence), us (the server's clock in µs when the rule read it, else nil) and at (the floor
-- in ms, as ACQUIRED records it, when the floor stood in for the clock, else nil), which the code
-- around it declares. No string is made on the clock's path: the caller writes the clock's
-- "SECONDS.MICROSECONDS" where it needs it. (tonumber converts its argument twice in Lua 5.1:
-- only a floor, Redlock's, pays it.)
do
  local floor = floorArg and floorArg ~= '' and tonumber(floorArg)
  if not floor or not prev then
    if not clock_t then
      clock_t = rcall('TIME')
    end
    us = clock_t[1] * 1000000 + clock_t[2]
    if not floor or us > floor then
      floor = us
    end
  else
    at = string.format('%d', math.floor(floor / 1000))
  end
  f = (prev or 0) + 1
  if f < floor then
    f = floor
  end
end
