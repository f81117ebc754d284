-- release.lua: owner-checked compare-and-delete, then wake the waiters.
-- KEYS[1] lock key
-- ARGV[1] owner value, ARGV[2] channel that waiters subscribe to
-- returns 1 if this owner's lock was deleted, 0 if the key is absent, held
--   by another owner, or not a string (then nothing is changed).
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
return 0
