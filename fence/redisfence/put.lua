-- put.lua: set the value if the fence is accepted (after check.lua).
-- KEYS[1] value key, KEYS[2] fence key
-- ARGV[1] lock, ARGV[2] token, ARGV[3] lease, ARGV[4] value,
--   ARGV[5] value TTL in milliseconds, "0" for none
-- returns {1} if accepted; {0, lock, token, lease} if refused, with the
--   current fence; {-1, key, type} if a key has the wrong type
local bad = wrongtype()
if bad then return bad end
local refused = check()
if refused then return refused end
record()
if ARGV[5] == '0' then
  redis.call('SET', KEYS[1], ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
end
return {1}
