-- release.lua: owner-checked compare-and-delete, then wake the waiters, if
-- any.
-- KEYS[1] lock key, KEYS[2] waiter mark (same hash tag as KEYS[1])
-- ARGV[1] owner value, ARGV[2] channel that waiters subscribe to (same
--   hash tag), ARGV[3] 'SPUBLISH' to publish on the key's shard (Cluster
--   with sharded pub/sub), else 'PUBLISH'
-- returns 1 if this owner's lock was deleted, 0 if the key is absent, held
--   by another owner, or not a string (then nothing is changed: pcall turns
--   GET's WRONGTYPE error into a table that equals no owner).
--
-- The mark is deleted with the lock: a release publishes only if someone
-- waited since the last release (see wake.go), and the waiters that stay
-- mark the lock again at their next attempt. The publish is a pcall:
-- scripts never roll back, so a publish the server refused (an ACL without
-- the channel) must not turn a lock already deleted into an error reply.
-- Waiters then wake at their retry timers.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  if redis.call('DEL', KEYS[1], KEYS[2]) > 1 then
    if ARGV[3] == 'SPUBLISH' then
      redis.pcall('SPUBLISH', ARGV[2], '')
    else
      redis.pcall('PUBLISH', ARGV[2], '')
    end
  end
  return 1
end
return 0
