-- renew.lua: extend a lease still held by its owner, and its token
-- counter's retention. A missing lock is never re-created: someone else
-- may have held it in between.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] lock-delay key, optional
--   (one hash tag, so one slot)
-- ARGV[1] owner value, ARGV[2] ttl in ms,
-- ARGV[3] token key expiry in ms: the TTL plus the retention (0: the counter is kept forever),
-- ARGV[4] lock-delay key expiry in ms: the TTL plus LockDelay (0 or
--   absent: the lease has no delay, KEYS[3] is not touched)
-- returns 1 if extended, 0 if the key is absent, held by another owner, or
--   not a string (pcall turns GET's WRONGTYPE error into a table that
--   equals no owner).
--
-- The counter's retention runs from the last acquisition or renewal: a
-- counter that lapsed while its lease was held would let the next
-- acquisition fall back to the clock floor, which is below the held token
-- whenever the counter is ahead of the clock.
--
-- The delay key (see acquire.lua) is written anew, not only extended,
-- while the owner holds the lock: it is the lease's own, and it must
-- outlive the lock by LockDelay at every renewal. A lease whose lock is
-- gone gets nothing: its delay runs from the expiry.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] ~= '0' then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  if KEYS[3] and ARGV[4] and ARGV[4] ~= '0' then
    redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[4])
  end
  return 1
end
return 0
