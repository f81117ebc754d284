-- permit.lua: take one slot of a semaphore by acquire.lua's rule, if the
-- semaphore has the number of permits the caller asks for; the first
-- acquisition of a semaphore records it. The client prepends acquire.lua
-- and permits.lua to this file, each wrapped as a function of its own KEYS
-- and ARGV (acquire, permits).
-- lua/semaphore.lua takes each slot it tries with this one's code, and a
-- quorum's nodes run it for the slot the client chose.
-- KEYS[1] to KEYS[3] acquire.lua's for the slot (its lock, token and
--   lock-delay keys), KEYS[4] the semaphore's permits key (one hash tag,
--   so one Cluster slot)
-- ARGV[1] to ARGV[5] acquire.lua's (owner value, ttl in ms, token key
--   expiry in ms (0 keeps it forever), proposal, lock-delay expiry),
--   ARGV[6] the number of permits asked for (decimal)
-- returns acquire.lua's reply for the slot; an error reply, with nothing
--   written, when the permits key holds another number or another type
--   (permits.lua; Semaphore.Resize changes the number).
--
-- The permits key is written with the token counter's expiry, at each
-- acquisition: a semaphore unused for the retention forgets its number,
-- as it forgets its tokens' counters.
local refused = permits({KEYS[4]}, {ARGV[6]})
if refused then
  return refused
end
local r = acquire({KEYS[1], KEYS[2], KEYS[3]}, {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]})
if r > 0 then
  if ARGV[3] == '0' then
    redis.call('SET', KEYS[4], ARGV[6])
  else
    redis.call('SET', KEYS[4], ARGV[6], 'PX', ARGV[3])
  end
end
return r
