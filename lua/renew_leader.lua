-- renew_leader.lua: renew.lua for an election's leadership: extend the
-- lock if owner holds it, its leader record with it, and the retention of
-- the token counter and the history.
-- KEYS[1] lock key, KEYS[2] token key, KEYS[3] leader record key,
--   KEYS[4] history key, KEYS[5] lock-delay key (one hash tag, so one
--   Cluster slot)
-- ARGV[1] owner value, ARGV[2] ttl in ms, ARGV[3] token key and history
--   retention in ms (0 keeps them forever), ARGV[4] lock-delay key
--   expiry in ms, 0 for none (as renew.lua's)
-- returns 1 if extended, 0 if the lock is absent, held by another owner,
--   or not a string (nothing is changed then).
--
-- The record's expiry is copied from the lock's (see announce.lua), so a
-- record never outlives its lock however often it is renewed. A lock
-- whose record is not its own (a quorum campaign that has not announced
-- yet on this node) is extended alone.
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.pcall('HGET', KEYS[3], 'check') == redis.sha1hex(ARGV[1]) then
  local at = redis.pcall('PEXPIRETIME', KEYS[1])
  if type(at) ~= 'number' or at <= 0 then
    -- Without PEXPIRETIME (Redis < 7.0): the clock, then the lock's PTTL,
    -- which is measured later, so the sum is no later than its expiry.
    local t = redis.call('TIME')
    at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + redis.call('PTTL', KEYS[1])
  end
  redis.call('PEXPIREAT', KEYS[3], at)
end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
end
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[4])
end
return 1
