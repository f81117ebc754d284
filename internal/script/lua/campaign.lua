-- campaign.lua: take an election's lock and announce its new leader in one
-- atomic step. The client prepends acquire.lua and announce.lua to this
-- file, each wrapped as a function of its own KEYS and ARGV (acquire,
-- announce), so that the token and the record are issued by the very
-- code that issues them elsewhere.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] lock-delay key
--   (acquire.lua's KEYS), KEYS[4] leader record key, KEYS[5] history key
--   (one hash tag, so one Cluster slot)
-- ARGV[1] to ARGV[5] acquire.lua's: owner value, ttl in ms, token key and
--   history retention in ms (0 keeps them forever), proposed token (0 for
--   none), lock-delay key expiry in ms (0 for none); ARGV[6] lease ID,
--   ARGV[7] value, ARGV[8] since (µs since the epoch), ARGV[9] observers'
--   channel, ARGV[10] 'SPUBLISH' or 'PUBLISH', ARGV[11] history length
-- returns acquire.lua's reply: the term (> 0) when owner leads (the
--   record and a history entry are written), minus the holder's remaining
--   TTL in ms (<= 0) when another owner holds the lock or its lock-delay
--   stands (see acquire.lua); an error reply, with nothing written, when a
--   key holds the wrong type.
--
-- Scripts never roll back: the record's and the history's types are
-- checked before acquire writes anything (acquire checks its own keys).
local rtype, htype = redis.call('TYPE', KEYS[4]).ok, redis.call('TYPE', KEYS[5]).ok
if (rtype ~= 'none' and rtype ~= 'hash') or (htype ~= 'none' and htype ~= 'stream') then
  return redis.error_reply('WRONGTYPE fencelock: leader record or history holds the wrong type')
end
local r = acquire({KEYS[1], KEYS[2], KEYS[3]}, {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]})
if r > 0 then
  announce({KEYS[1], KEYS[4], KEYS[5]}, {ARGV[1], 'elected', string.format('%d', r),
    ARGV[6], ARGV[7], '0', ARGV[8], ARGV[9], ARGV[10], ARGV[3], ARGV[11]})
end
return r
