-- semaphore.lua: take one permit of a semaphore of N permits, in one atomic
-- step. A semaphore is N lock slots of one name; each slot is taken by
-- permit.lua's rule (acquire.lua's, and the semaphore's number of
-- permits, permits.lua's), which the client prepends to this file with
-- the files it runs, each wrapped as a function of its own KEYS and ARGV
-- (acquire, permits, permit), so that a slot's lock and token follow every
-- rule of a lock's.
-- KEYS the slots' keys, K per slot: slot i's (from 0) are KEYS[i*K+1] to
--   KEYS[i*K+K], acquire.lua's KEYS for that slot (its lock key first),
--   all with the semaphore's hash tag, so one Cluster slot; then the
--   semaphore's permits key (permit.lua's KEYS[4]), last
-- ARGV[1] N, the permits (slots 0 to N-1), ARGV[2] K, ARGV[3] and on:
--   acquire.lua's ARGV, the same for every slot (the owner value first)
-- returns {slot, reply}: reply is acquire.lua's for that slot, a token
--   (> 0), when the owner holds the slot now; {-1, minus the shortest
--   remaining TTL in ms among the held slots (< 0, at least 1 ms, as
--   acquire.lua's; 0 if none has one)} when every slot is held; an error reply, with nothing written,
--   when a slot's lock key is not a string, the slot taken has a token
--   key that holds no integer, or the semaphore has another number of
--   permits (permit.lua).
--
-- A slot this owner holds already comes first: a request that go-redis
-- retried after its reply was lost must get its own permit back, not a
-- second one. Then the free slots from slot 0 up: the lowest free slot
-- is the clearest meaning when N changes (a semaphore asked with fewer
-- permits takes only slots below its N, and the low slots are the ones
-- every caller shares), and fairness among waiters is the client's FIFO
-- queue's and the TTL's, not the slot's. Every lock key is read before
-- the first write, and the number of permits is checked first, even when
-- every slot is held: scripts never roll back.
local refused = permits({KEYS[#KEYS]}, {ARGV[1]})
if refused then
  return refused
end
local n, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local argv = {}
for j = 3, #ARGV do
  argv[#argv + 1] = ARGV[j]
end
argv[#argv + 1] = ARGV[1]
local function slot(i)
  local keys = {}
  for j = 1, k do
    keys[j] = KEYS[i * k + j]
  end
  keys[#keys + 1] = KEYS[#KEYS]
  return keys
end
local free, wait = {}, nil
for i = 0, n - 1 do
  -- GET fails with WRONGTYPE if the key is not a string.
  local v = redis.call('GET', KEYS[i * k + 1])
  if v == argv[1] then
    return {i, permit(slot(i), argv)}
  end
  if v then
    local pttl = redis.call('PTTL', KEYS[i * k + 1])
    if pttl >= 0 and (wait == nil or pttl < wait) then
      wait = math.max(pttl, 1)
    end
  else
    free[#free + 1] = i
  end
end
for _, i in ipairs(free) do
  -- permit may refuse a free slot (acquire's rule may keep a slot
  -- unavailable for a while): then the next one.
  local r = permit(slot(i), argv)
  if r > 0 then
    return {i, r}
  end
  if wait == nil or -r < wait then
    wait = -r
  end
end
return {-1, -(wait or 0)}
