-- delete.lua: delete the value if the fence is accepted, and record the
-- fence, which is never deleted (after check.lua).
-- KEYS[1] value key, KEYS[2] fence key
-- ARGV[1] lock, ARGV[2] token, ARGV[3] lease
-- returns {1} if accepted; {0, lock, token, lease} if refused;
--   {-1, key, type} if a key has the wrong type
local bad = wrongtype()
if bad then return bad end
local refused, same = check()
if refused then return refused end
if not same then record() end
redis.call('DEL', KEYS[1])
return {1}
