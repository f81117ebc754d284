-- acquire.lua: take the lock if it is free and issue its fencing token, in
-- one atomic step.
-- KEYS[1] lock key, KEYS[2] token key (same hash tag, so same slot)
-- ARGV[1] owner value, ARGV[2] ttl in ms,
-- ARGV[3] token key retention in ms (0 keeps it forever)
-- returns {1, token} when acquired (or when this owner already holds it: a
--   retried request gets the token it was issued), {0, pttl} when another
--   owner holds it; an error reply, with nothing written, when either key
--   holds a value of the wrong type.
--
-- token = max(stored + 1, server time in microseconds): the clock floor
-- keeps tokens increasing after the counter is lost (restart without
-- persistence, eviction, failover to a lagging replica). Lua numbers are
-- doubles, exact to 2^53 (year 2255 in microseconds); the token is written
-- with %d, never tostring, which would print 1.7e+15.
--
-- Scripts never roll back, so everything that can fail (a wrong-type or
-- non-integer counter, a command the ACL refuses, such as TIME) is done
-- before the first write.
local stored = redis.call('GET', KEYS[2])
if stored then
  stored = tonumber(stored)
  if not stored then
    return redis.error_reply('WRONGTYPE fencelock: token key does not hold an integer')
  end
end
local t = redis.call('TIME')
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Held. GET fails with WRONGTYPE if the key is not a string.
  if redis.call('GET', KEYS[1]) == ARGV[1] and stored then
    return {1, stored}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
if stored and stored + 1 > token then
  token = stored + 1
end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[2], string.format('%d', token))
else
  redis.call('SET', KEYS[2], string.format('%d', token), 'PX', ARGV[3])
end
return {1, token}
