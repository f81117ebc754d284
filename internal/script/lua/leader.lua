-- leader.lua: read who leads an election, and the history after a given
-- entry, in one consistent snapshot. Never returns the owner value.
-- KEYS[1] lock key, KEYS[2] leader record key, KEYS[3] history key (one
--   hash tag, so one Cluster slot)
-- ARGV[1] history entry ID to read after, or '' to read none and return
--   the last entry's ID, ARGV[2] most entries to return, ARGV[3] '1' to
--   return the seqs of the record's changes that the history holds (a
--   quorum's, to tell which values this node accepted), else '0'
-- returns {state, pttl, value, term, lease, seq, since, last, entries,
--   seqs}:
--   state 0 when the lock is free, 1 when it is held and the record is
--   its own (value ... since are the record's), 2 when the lock is held
--   without a record of its own (a lease that did not campaign, or a
--   quorum campaign that has not announced on this node yet); pttl is the
--   lock's in ms; last is the ID of the last history entry returned (or,
--   with ARGV[1] '', of the last entry), else ARGV[1] ('0-0' for none);
--   entries are XRANGE's reply: {id, {field, value, ...}} in order;
--   seqs, with ARGV[3] '1' and state 1, the seq of every 'elected' or
--   'proclaimed' entry of the record's term and lease among the last
--   ARGV[2] entries, newest first, else empty.
local state, pttl = 0, 0
local rec = {'', '', '', '', ''}
local owner = redis.pcall('GET', KEYS[1])
if type(owner) == 'string' then
  state, pttl = 2, redis.call('PTTL', KEYS[1])
  local r = redis.pcall('HMGET', KEYS[2], 'check', 'value', 'term', 'lease', 'seq', 'since')
  if type(r) == 'table' and r[1] == redis.sha1hex(owner) then
    state = 1
    for i = 2, 6 do
      rec[i - 1] = r[i] or ''
    end
  end
elseif type(owner) == 'table' then
  state = 2 -- the lock key holds another type: held, by nobody who campaigned
end
local last, entries = ARGV[1], {}
if last == '' then
  last = '0-0'
end
if redis.call('TYPE', KEYS[3]).ok == 'stream' then
  if ARGV[1] == '' then
    local e = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
    if #e > 0 then
      last = e[1][1]
    end
  else
    entries = redis.call('XRANGE', KEYS[3], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
    if #entries > 0 then
      last = entries[#entries][1]
    end
  end
end
local seqs = {}
if ARGV[3] == '1' and state == 1 and redis.call('TYPE', KEYS[3]).ok == 'stream' then
  for _, e in ipairs(redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', ARGV[2])) do
    local f = {}
    for i = 1, #e[2], 2 do
      f[e[2][i]] = e[2][i + 1]
    end
    if f.term == rec[2] and f.lease == rec[3] and (f.kind == 'elected' or f.kind == 'proclaimed') then
      seqs[#seqs + 1] = f.seq
    end
  end
end
return {state, pttl, rec[1], rec[2], rec[3], rec[4], rec[5], last, entries, seqs}
