-- Fenced write: store a value only if its fencing token is at least the highest one seen.
-- KEYS[1] the record (a hash: fence, value)
-- ARGV[1] fencing token (decimal), ARGV[2] value
-- Returns 1 when written, 0 when rejected because a higher fence was seen.
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if not fence or fence < seen then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1
