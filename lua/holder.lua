-- holder.lua: read who holds a lock, in one consistent snapshot, for
-- Client.Holder.
-- KEYS[1] lock key, KEYS[2] token key (same hash tag, so same slot)
-- returns {owner, pttl, token}: owner is the lock's value, '' when the
--   lock is free; pttl its remaining TTL in ms (-1 if it has none, 0 when
--   free); token the counter's value, '' if there is none. An error reply
--   (WRONGTYPE) when either key holds another type.
-- The owner value is the holder's secret: the client derives the public
-- lease ID from it and drops it.
local owner = redis.call('GET', KEYS[1])
local token = redis.call('GET', KEYS[2]) or ''
if not owner then
  return {'', 0, token}
end
return {owner, redis.call('PTTL', KEYS[1]), token}
