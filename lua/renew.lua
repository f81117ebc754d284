-- renew.lua: extend a lease still held by its owner, and its token
-- counter's retention. A missing lock is never re-created: someone else
-- may have held it in between.
-- KEYS[1] lock key, KEYS[2] token key (same hash tag, so same slot)
-- ARGV[1] owner value, ARGV[2] ttl in ms,
-- ARGV[3] token key expiry in ms: the TTL plus the retention (0: the counter is kept forever)
-- returns 1 if extended, 0 if the key is absent, held by another owner, or
--   not a string (pcall turns GET's WRONGTYPE error into a table that
--   equals no owner).
--
-- The counter's retention runs from the last acquisition or renewal: a
-- counter that lapsed while its lease was held would let the next
-- acquisition fall back to the clock floor, which is below the held token
-- whenever the counter is ahead of the clock.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] ~= '0' then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return 1
end
return 0
