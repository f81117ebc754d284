-- acquire.lua: take the lock if it is free and issue its fencing token, in
-- one atomic step.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] lock-delay key, optional
--   (one hash tag, so one slot)
-- ARGV[1] owner value, ARGV[2] ttl in ms,
-- ARGV[3] token key expiry in ms: the TTL plus the retention (0 keeps it forever),
-- ARGV[4] proposed token in µs, 0 for none: a quorum's (quorum.go),
-- ARGV[5] lock-delay key expiry in ms: the TTL plus the lease's
--   LockDelay; 0 or absent for none (the delay key is then only read)
-- returns the token (> 0) when acquired; when another owner holds the
--   lock, minus its remaining TTL in ms (< 0, at least 1 ms: a key in its
--   last millisecond reads PTTL 0; 0 if it has no TTL); when the lock is
--   free but KEYS[3] holds another owner's value (a lease that expired
--   less than its LockDelay ago), minus the delay key's remaining TTL in
--   ms, so that the caller waits as for a held lock; an
--   error reply, with nothing written, when any key holds a value of
--   the wrong type. When this owner already holds the lock (a retried
--   request), the token it was issued, or with a proposal a token issued
--   anew: in a quorum another client's write-back may have raised the
--   counter since, and every token a node returns with a proposal must be
--   one it issued to this very request.
--
-- Lock-delay (Chubby's): a lease acquired with ARGV[5] > 0 writes the
-- delay key with its owner value and that expiry, renew.lua extends it
-- with the lock, and release.lua deletes it with the lock. So a lease
-- that ends by expiry leaves it behind for LockDelay more, and every
-- acquirer, whatever its own LockDelay, is refused until it expires; a
-- delay key of this very owner (a retried request whose lock expired)
-- refuses nothing. It is checked while the lock is free only: a held
-- lock is refused as it always was.
--
-- token = max(stored + 1, server time in microseconds): the clock floor
-- keeps tokens increasing after the counter is lost (restart without
-- persistence, eviction, failover to a lagging replica). A proposal raises
-- the token to it, but to no more than 250 ms ahead of the server's
-- clock, so that nodes which agree on time issue the same token. Lua
-- numbers are doubles, exact to 2^53 (year 2255 in microseconds); the
-- token is written with %d, never tostring, which would print 1.7e+15.
-- The integer reply is the double truncated: exact too.
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
local proposal = tonumber(ARGV[4])
local t = redis.call('TIME')
-- GET fails with WRONGTYPE if a key is not a string.
if KEYS[3] then
  local delayed = redis.call('GET', KEYS[3])
  if delayed and delayed ~= ARGV[1] and not redis.call('GET', KEYS[1]) then
    local pttl = redis.call('PTTL', KEYS[3])
    if pttl < 0 then
      return 0
    end
    return -math.max(pttl, 1)
  end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Held. GET fails with WRONGTYPE if the key is not a string.
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl < 0 then
      return 0
    end
    return -math.max(pttl, 1)
  end
  if stored and proposal == 0 then
    return stored
  end
end
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = now
if stored and stored + 1 > token then
  token = stored + 1
end
local raised = math.min(proposal, now + 250000)
if raised > token then
  token = raised
end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[2], string.format('%d', token))
else
  redis.call('SET', KEYS[2], string.format('%d', token), 'PX', ARGV[3])
end
if KEYS[3] and ARGV[5] and ARGV[5] ~= '0' then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[5])
end
return token
