-- renew_leader.lua: renew an election's leadership: renew.lua's renewal of
-- the lock, and with it the leader record's expiry and the history's
-- retention. The client prepends renew.lua to this file, wrapped as a
-- function of its own KEYS and ARGV (renew), so that a leadership is
-- renewed by the very code that renews a lock.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] lock-delay key (renew.lua's
--   KEYS), KEYS[4] leader record key, KEYS[5] history key (one hash tag,
--   so one Cluster slot)
-- ARGV renew.lua's: ARGV[1] owner value, ARGV[2] ttl in ms, ARGV[3] token
--   key and history retention in ms (0 keeps them forever), ARGV[4]
--   lock-delay key expiry in ms, 0 for none
-- returns renew.lua's reply: 1 if extended, 0 if the lock is absent, held
--   by another owner, or not a string (nothing is changed then).
--
-- The record's expiry is copied from the lock's (see announce.lua), so a
-- record never outlives its lock however often it is renewed. A lock
-- whose record is not its own (a quorum campaign that has not announced
-- yet on this node) is renewed alone.
if renew({KEYS[1], KEYS[2], KEYS[3]}, ARGV) == 0 then
  return 0
end
if redis.pcall('HGET', KEYS[4], 'check') == redis.sha1hex(ARGV[1]) then
  redis.call('PEXPIREAT', KEYS[4], redis.call('PEXPIRETIME', KEYS[1]))
end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[5], ARGV[3])
end
return 1
