-- holder.lua: read who holds a lock, in one consistent snapshot, for
-- Client.Holder, Semaphore.Holders and a quorum's choice of a free slot.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] lock-delay key (same hash
--   tag, so same slot)
-- returns {owner, pttl, token, delayed, delay}: owner is the lock's value,
--   '' when the lock is free; pttl its remaining TTL in ms (-1 if it has
--   none, 0 when free); token the counter's value, '' if there is none;
--   delayed, while the lock is free, the value of the lease whose expiry
--   keeps it unavailable (lock-delay, see acquire.lua), else ''; delay
--   that delay's remaining TTL in ms (-1 if it has none, 0 for none). An
--   error reply (WRONGTYPE) when a key holds another type.
-- The values are leases' secrets: the client derives the public lease IDs
-- from them and drops them.
local owner = redis.call('GET', KEYS[1])
local token = redis.call('GET', KEYS[2]) or ''
if owner then
  return {owner, redis.call('PTTL', KEYS[1]), token, '', 0}
end
local delayed = redis.call('GET', KEYS[3])
if not delayed then
  return {'', 0, token, '', 0}
end
return {'', 0, token, delayed, redis.call('PTTL', KEYS[3])}
