-- landing.lua: append a call's landing to a resource Redis's log, in the
-- same MULTI as the call, so that the log holds the order in which calls
-- landed and the resource's fence right after each.
-- KEYS[1] the log (a list), KEYS[2] the resource's fence hash (redisfence's;
--   absent for the unfenced control)
-- ARGV[1] the call's operation ID
-- returns the log's length
local f = redis.call('HMGET', KEYS[2], 'lock', 'token', 'lease')
return redis.call('RPUSH', KEYS[1], ARGV[1] .. ' ' .. (f[1] or '') .. ' ' .. (f[2] or '') .. ' ' .. (f[3] or ''))
