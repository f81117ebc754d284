-- release.lua: owner-checked compare-and-delete, then wake the waiters.
-- KEYS[1] lock key, KEYS[2] lock-delay key (same hash tag), optional:
--   sent by a Client with LockDelay, whose leases write one
-- ARGV[1] owner value, ARGV[2] channel that waiters subscribe to (same
--   hash tag as KEYS[1]), ARGV[3] 'SPUBLISH' to publish on the key's shard
--   (Cluster with sharded pub/sub), else 'PUBLISH' or absent
-- returns 1 if this owner's lock was deleted, 0 if the key is absent, held
--   by another owner, or not a string (then nothing is changed: pcall turns
--   GET's WRONGTYPE error into a table that equals no owner).
--
-- A release skips the lock-delay (see acquire.lua): the delay key goes
-- with the lock, if it holds this owner's value. A lease whose lock is
-- gone (it expired) deletes nothing, so its delay stands.
--
-- The publish comes first: scripts never roll back, so a publish the ACL
-- refuses must fail the release before anything is deleted, not after.
-- Nobody can see the order: the script runs alone, and waiters act on the
-- message once it has ended.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] == 'SPUBLISH' then
    redis.call('SPUBLISH', ARGV[2], '')
  else
    redis.call('PUBLISH', ARGV[2], '')
  end
  redis.call('DEL', KEYS[1])
  if KEYS[2] and redis.pcall('GET', KEYS[2]) == ARGV[1] then
    redis.call('DEL', KEYS[2])
  end
  return 1
end
return 0
