-- renew.lua: extend a lease still held by its owner. A missing lock is
-- never re-created: someone else may have held it in between.
-- KEYS[1] lock key
-- ARGV[1] owner value, ARGV[2] ttl in ms
-- returns 1 if extended, 0 if the key is absent, held by another owner, or
--   not a string (pcall turns GET's WRONGTYPE error into a table that
--   equals no owner).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
