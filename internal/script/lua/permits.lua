-- permits.lua: check that a semaphore has the number of permits a caller
-- asks for. lua/permit.lua and lua/semaphore.lua run it as a function of
-- its own KEYS and ARGV (permits), before they write anything.
-- KEYS[1] the semaphore's permits key
-- ARGV[1] the number of permits asked for (decimal)
-- returns false when the semaphore has no number yet (its first
--   acquisition records it) or has that one; an error reply when it has
--   another ("ERR fencelock: semaphore has N permits") or the key holds
--   another type (WRONGTYPE).
local n = redis.call('GET', KEYS[1])
if n and n ~= ARGV[1] then
  return redis.error_reply('ERR fencelock: semaphore has ' .. n .. ' permits')
end
return false
