-- semaphore_release.lua: release whatever permit of a semaphore an owner
-- holds, for the cleanup of an acquisition attempt whose reply is not to
-- be trusted (its slot is unknown). Each slot is released by release.lua's
-- own rule, which the client prepends to this file wrapped as a function
-- of its own KEYS and ARGV (release).
-- KEYS each slot's lock key and lock-delay key, slot 0 first (2N of them)
-- ARGV release.lua's ARGV: owner value, channel, 'SPUBLISH' or 'PUBLISH'
-- returns how many slots the owner held and were deleted (0 or 1: the
--   acquisition takes one slot per owner; every slot is looked at all the
--   same).
local deleted = 0
for i = 1, #KEYS, 2 do
  deleted = deleted + release({KEYS[i], KEYS[i + 1]}, ARGV)
end
return deleted
