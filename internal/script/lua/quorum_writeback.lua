-- quorum_writeback.lua: raise a quorum node's token counter to the token a
-- quorum acquisition chose, if this attempt holds the lock there and the
-- counter is below the token. The nodes that issued the chosen token are
-- not asked: they store it already.
-- KEYS[1] token key, KEYS[2] lock key (same hash tag, so same slot)
-- ARGV[1] token (decimal integer > 0), ARGV[2] token key expiry in ms (the
--   TTL plus the retention; 0 keeps it forever), ARGV[3] the attempt's
--   owner value
-- returns 1 if ARGV[3] holds the lock and the stored token was absent or
--   lower and is now ARGV[1]; 0, with nothing changed, if the lock is not
--   ARGV[3]'s (expired, taken by another attempt, or lost in a restart) or
--   the node stores a token >= ARGV[1] (a later or concurrent acquisition
--   owns that token or a greater one); an error reply, with nothing
--   written, when the token key does not hold an integer or the lock key
--   is not a string.
--
-- A node accepts a token for an attempt, here or in acquire.lua, only
-- while that attempt holds its lock and only from below. Its counter only
-- grows, so it accepts a given token once; a node that restarted empty
-- lost every lock taken before, and a lock taken after it issues a token
-- at its clock floor, above every token issued before the restart (the
-- clock-floor assumption, FAILURE_MODEL.md). So two acquisitions never
-- both have a majority accept the same token, restarts included.
local token = tonumber(ARGV[1])
local stored = redis.call('GET', KEYS[1])
if stored then
  stored = tonumber(stored)
  if not stored then
    return redis.error_reply('WRONGTYPE fencelock: token key does not hold an integer')
  end
  if stored >= token then
    return 0
  end
end
-- GET fails with WRONGTYPE if the lock key is not a string.
if redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return 0
end
if ARGV[2] == '0' then
  redis.call('SET', KEYS[1], string.format('%d', token))
else
  redis.call('SET', KEYS[1], string.format('%d', token), 'PX', ARGV[2])
end
return 1
