-- resign.lua: end an election's leadership: release.lua's owner-checked
-- delete of the lock (with its wake-up for the candidates), and with it
-- the leader record, an entry in the history and a wake-up for the
-- observers. The client prepends release.lua to this file, wrapped as a
-- function of its own KEYS and ARGV (release), so that a leadership ends
-- by the very code that releases a lock.
-- KEYS[1] lock key, KEYS[2] lock-delay key (release.lua's KEYS), KEYS[3]
--   leader record key, KEYS[4] history key (one hash tag, so one Cluster
--   slot)
-- ARGV[1] owner value, ARGV[2] the lock's release channel (candidates),
--   ARGV[3] 'SPUBLISH' to publish on the key's shard, else 'PUBLISH'
--   (release.lua's ARGV), ARGV[4] observers' channel, ARGV[5] history
--   retention in ms (0 keeps it forever), ARGV[6] history length
-- returns release.lua's reply: 1 if owner's lock was deleted, 0 if the
--   lock is absent, held by another owner or not a string (nothing is
--   changed then).
--
-- Everything after release is a pcall: scripts never roll back, so a
-- record or history of the wrong type, or a publish the ACL refuses, must
-- not turn a lock already deleted into an error reply. (release.lua
-- publishes before it deletes, for the same reason.)
if release({KEYS[1], KEYS[2]}, {ARGV[1], ARGV[2], ARGV[3]}) == 0 then
  return 0
end
local r = redis.pcall('HMGET', KEYS[3], 'check', 'term', 'lease')
if type(r) == 'table' and r[1] == redis.sha1hex(ARGV[1]) then
  redis.call('DEL', KEYS[3])
  redis.pcall('XADD', KEYS[4], 'MAXLEN', ARGV[6], '*', 'kind', 'resigned', 'term', r[2],
    'lease', r[3])
  if ARGV[5] ~= '0' then
    redis.pcall('PEXPIRE', KEYS[4], ARGV[5])
  end
end
if ARGV[3] == 'SPUBLISH' then
  redis.pcall('SPUBLISH', ARGV[4], '')
else
  redis.pcall('PUBLISH', ARGV[4], '')
end
return 1
