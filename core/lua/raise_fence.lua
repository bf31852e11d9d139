-- Redlock fence write-back: counter = max(counter, fence).
-- KEYS[1] fence counter; ARGV[1] fence
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 0
