-- keep makes key live at least ms more and never shortens it (what it holds may rely on it): it
-- gives the key twice that, so that the calls that follow within ms find it long enough and write
-- nothing (a key outlives what it holds by at most twice its lease).
local function keep(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then
    redis.call('PEXPIRE', key, ms * 2)
  end
end
