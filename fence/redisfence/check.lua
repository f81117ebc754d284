-- check.lua: the fencing rule, put before put.lua, get.lua and delete.lua.
-- KEYS[1] value key (a string), KEYS[2] fence key (a hash: lock, token, lease)
-- ARGV[1] lock name, ARGV[2] token as a canonical decimal (> 0, no leading
--   zeros), ARGV[3] lease
-- Defines wrongtype(), check() and record(); returns nothing itself.
--
-- Tokens are compared as decimal strings and stored as the ARGV string,
-- never as Lua numbers: those are doubles, exact only up to 2^53.

-- wrongtype returns the reply for a key of the wrong type, else nil.
local function wrongtype()
  local t = redis.call('TYPE', KEYS[1]).ok
  if t ~= 'none' and t ~= 'string' then return {-1, KEYS[1], t} end
  t = redis.call('TYPE', KEYS[2]).ok
  if t ~= 'none' and t ~= 'hash' then return {-1, KEYS[2], t} end
  return nil
end

-- newer reports a > b for canonical decimals: the longer is greater;
-- up to 15 digits a double is exact; longer ones compare in two parts of
-- at most 10 and 9 digits.
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  if #a <= 15 then return tonumber(a) > tonumber(b) end
  local cut = #a - 9
  local ha, hb = tonumber(string.sub(a, 1, cut)), tonumber(string.sub(b, 1, cut))
  if ha ~= hb then return ha > hb end
  return tonumber(string.sub(a, cut + 1)) > tonumber(string.sub(b, cut + 1))
end

-- check returns nil, same if the fence in ARGV is accepted (same: it is the
-- stored one already), else the reply for a refusal carrying the current fence.
local function check()
  local cur = redis.call('HMGET', KEYS[2], 'lock', 'token', 'lease')
  if not cur[2] then return nil, false end
  if cur[1] == ARGV[1] then
    if ARGV[2] == cur[2] and ARGV[3] == cur[3] then return nil, true end
    if newer(ARGV[2], cur[2]) then return nil, false end
  end
  return {0, cur[1], cur[2], cur[3]}
end

-- record stores the fence in ARGV as the current one.
local function record()
  redis.call('HSET', KEYS[2], 'lock', ARGV[1], 'token', ARGV[2], 'lease', ARGV[3])
end
