-- resign.lua: end an election's leadership: owner-checked delete of the
-- lock and its leader record, an entry in the history, and wake-ups for
-- the candidates waiting for the lock and for the observers.
-- KEYS[1] lock key, KEYS[2] leader record key, KEYS[3] history key,
--   KEYS[4] lock-delay key (one hash tag, so one Cluster slot)
-- ARGV[1] owner value, ARGV[2] the lock's release channel (candidates),
--   ARGV[3] observers' channel, ARGV[4] 'SPUBLISH' to publish on the
--   key's shard, else 'PUBLISH', ARGV[5] history retention in ms (0 keeps
--   it forever), ARGV[6] history length
-- returns 1 if owner's lock was deleted, 0 if the lock is absent, held by
--   another owner or not a string (nothing is changed then).
--
-- Resigning skips the lock-delay as release.lua does: the delay key goes
-- with the lock if it is owner's.
--
-- Everything after the lock's DEL is a pcall: scripts never roll back, so
-- a record or history of the wrong type, or a publish the ACL refuses,
-- must not turn a lock already deleted into an error reply.
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if redis.pcall('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
end
local r = redis.pcall('HMGET', KEYS[2], 'check', 'term', 'lease')
if type(r) == 'table' and r[1] == redis.sha1hex(ARGV[1]) then
  redis.call('DEL', KEYS[2])
  redis.pcall('XADD', KEYS[3], 'MAXLEN', ARGV[6], '*', 'kind', 'resigned', 'term', r[2],
    'lease', r[3])
  if ARGV[5] ~= '0' then
    redis.pcall('PEXPIRE', KEYS[3], ARGV[5])
  end
end
local publish = 'PUBLISH'
if ARGV[4] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
redis.pcall(publish, ARGV[2], '')
redis.pcall(publish, ARGV[3], '')
return 1
