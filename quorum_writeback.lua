-- quorum_writeback.lua: raise a quorum node's token counter to the token a
-- quorum acquisition chose, if it is below it. The node that issued the
-- chosen token is not asked: it stores it already.
-- KEYS[1] token key
-- ARGV[1] token (decimal integer > 0), ARGV[2] token key expiry in ms (the TTL plus the retention)
--   (0 keeps it forever)
-- returns 1 if the stored token was absent or lower and is now ARGV[1],
--   0 if the node stores a token >= ARGV[1] (then nothing is changed: a
--   later or concurrent acquisition owns that token or a greater one); an
--   error reply, with nothing written, when the key does not hold an
--   integer.
--
-- Each node accepts a given token at most once, so two acquisitions can
-- never both have a majority accept the same token.
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
if ARGV[2] == '0' then
  redis.call('SET', KEYS[1], string.format('%d', token))
else
  redis.call('SET', KEYS[1], string.format('%d', token), 'PX', ARGV[2])
end
return 1
