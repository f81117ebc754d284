-- load.lua: an unfenced read of the value and the current fence, taken
-- together so they belong to the same moment.
-- KEYS[1] value key, KEYS[2] fence key
-- returns {1, value, lock, token, lease}, each false (nil) if absent;
--   {-1, key, type} if a key has the wrong type
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then return {-1, KEYS[1], t} end
t = redis.call('TYPE', KEYS[2]).ok
if t ~= 'none' and t ~= 'hash' then return {-1, KEYS[2], t} end
local cur = redis.call('HMGET', KEYS[2], 'lock', 'token', 'lease')
return {1, redis.call('GET', KEYS[1]), cur[1], cur[2], cur[3]}
