-- slots.lua: read who holds each slot of a semaphore, in one consistent
-- snapshot, for Semaphore.Holders and a quorum's choice of a free slot.
-- The client prepends holder.lua to this file, wrapped as a function of
-- its own KEYS (holder), so that each slot is read as a lock is.
-- KEYS each slot's holder.lua KEYS, 3 per slot: slot i's (from 0) are
--   KEYS[3i+1] to KEYS[3i+3] (its lock, token and lock-delay keys), then
--   the semaphore's permits key (lua/permit.lua), last; all with the
--   semaphore's hash tag, so one Cluster slot
-- returns {slots, permits}: slots holder.lua's reply for each slot, slot
--   0 first; permits the semaphore's number of permits, '' if it has
--   none recorded; an error reply (WRONGTYPE) when a key holds another
--   type.
local out = {}
for i = 1, #KEYS - 1, 3 do
  out[#out + 1] = holder({KEYS[i], KEYS[i + 1], KEYS[i + 2]})
end
return {out, redis.call('GET', KEYS[#KEYS]) or ''}
