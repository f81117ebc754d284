-- announce.lua: write an election leader's public record while owner holds
-- the election's lock, append the change to the election's history, and
-- wake the observers. Used at election (within campaign.lua, or as a
-- quorum campaign's last round) and by Proclaim.
-- KEYS[1] lock key, KEYS[2] leader record key, KEYS[3] history key (one
--   hash tag, so one Cluster slot)
-- ARGV[1] owner value, ARGV[2] 'elected' or 'proclaimed', ARGV[3] term
--   (decimal integer), ARGV[4] lease ID, ARGV[5] value, ARGV[6] proclaim
--   sequence number (0 at election), ARGV[7] since (µs since the epoch),
--   ARGV[8] observers' channel (same hash tag), ARGV[9] 'SPUBLISH' to
--   publish on the key's shard, else 'PUBLISH', ARGV[10] history
--   retention in ms (0 keeps it forever), ARGV[11] history length
-- returns 1 if the record says what ARGV says (written now, or already:
--   a retried election), 0 if owner does not hold the lock or, for
--   'proclaimed', the record is not its term's (nothing is written then);
--   an error reply, with nothing written, if the record or the history
--   holds the wrong type.
--
-- The record is a hash: value, term, lease, seq, since, and check, the
-- SHA-1 of the owner value, which ties the record to the lock it belongs
-- to without revealing the owner (leader.lua compares it with the lock's
-- value). It expires with the lock, to the millisecond (PEXPIRETIME, Redis
-- >= 7.0): a record never outlives its lock.
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local rtype, htype = redis.call('TYPE', KEYS[2]).ok, redis.call('TYPE', KEYS[3]).ok
if (rtype ~= 'none' and rtype ~= 'hash') or (htype ~= 'none' and htype ~= 'stream') then
  return redis.error_reply('WRONGTYPE fencelock: leader record or history holds the wrong type')
end
local check = redis.sha1hex(ARGV[1])
local r = redis.call('HMGET', KEYS[2], 'check', 'term')
if ARGV[2] == 'elected' and r[1] == check and r[2] == ARGV[3] then
  return 1
end
if ARGV[2] == 'proclaimed' and (r[1] ~= check or r[2] ~= ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[2], 'value', ARGV[5], 'term', ARGV[3], 'lease', ARGV[4],
  'seq', ARGV[6], 'since', ARGV[7], 'check', check)
redis.call('PEXPIREAT', KEYS[2], redis.call('PEXPIRETIME', KEYS[1]))
redis.call('XADD', KEYS[3], 'MAXLEN', ARGV[11], '*', 'kind', ARGV[2], 'term', ARGV[3],
  'lease', ARGV[4], 'seq', ARGV[6], 'value', ARGV[5], 'since', ARGV[7])
if ARGV[10] ~= '0' then
  redis.call('PEXPIRE', KEYS[3], ARGV[10])
end
if ARGV[9] == 'SPUBLISH' then
  redis.pcall('SPUBLISH', ARGV[8], '')
else
  redis.pcall('PUBLISH', ARGV[8], '')
end
return 1
