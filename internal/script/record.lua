-- record: a Client's configuration record (docs/reconfiguration.md). One
-- hash per node and prefix, KEYS[1]; each field's value starts with its
-- expiry (node milliseconds), and a move floor's goes on with ":M:V": the
-- floor M and the node time V until which it is fresh.
--
-- KEYS[2] is the node's epoch record (epoch.lua): a record round passes
-- the restart guard, as every reply that counts toward a quorum does. A
-- node that may have lost its records (it restarted, or a replica was
-- promoted) answers {-1, ms}, recovering for ms more, and changes
-- nothing: its empty records must not count as a node that saw no
-- Client. ARGV[1..5] are the guard's: max_ttl, delta, guard, (unused),
-- record expiry, as in acquire.lua.
--
-- ARGV[6] is the number n of fields to keep alive: ARGV[7..2n+6] are pairs
-- of a field and a TTL (ms); each such field expires at now + TTL, or
-- later if it already did. The quadruples after them are move floors to
-- raise: a field, ahead and TTL (ms) and until (a node time, ms): M
-- becomes at least now + ahead, V at least until (when until > 0), and
-- the field expires at M + TTL, or later if it already did. A floor only
-- rises while it lives.
--
-- Expired fields are deleted, the hash expires with its last field, and
-- the reply is the node's time followed by every live field and its value.

local key = KEYS[1]
local _, recovering = epoch(KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[5]))
if recovering > 0 then
  return {-1, recovering}
end
local now = node_now()

local function expiry(v)
  -- Through a local: an interpreter whose string.match returns no value
  -- where none matched (gopher-lua, in miniredis) passes tonumber nil.
  local e = string.match(v or '', '^(%d+)')
  return tonumber(e)
end

local n = tonumber(ARGV[6])
local i = 7
for _ = 1, n do
  local f, exp = ARGV[i], now + tonumber(ARGV[i + 1])
  i = i + 2
  local old = expiry(redis.call('HGET', key, f))
  if not old or old < exp then
    redis.call('HSET', key, f, string.format('%d', exp))
  end
end
while i + 3 <= #ARGV do
  local f = ARGV[i]
  local ahead, ttl, untl = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  i = i + 4
  local old = redis.call('HGET', key, f)
  local exp, m, v = 0, 0, 0
  if old then
    local e, om, ov = string.match(old, '^(%d+):?(%d*):?(%d*)')
    exp = tonumber(e) or 0
    if exp > now then
      m, v = tonumber(om) or 0, tonumber(ov) or 0
    else
      exp = 0
    end
  end
  m = math.max(m, now + ahead)
  if untl > 0 then
    v = math.max(v, untl)
  end
  exp = math.max(exp, m + ttl)
  redis.call('HSET', key, f, string.format('%d:%d:%d', exp, m, v))
end

local all = redis.call('HGETALL', key)
local out = {now}
local last = 0
for j = 1, #all, 2 do
  local exp = expiry(all[j + 1])
  if not exp or exp <= now then
    redis.call('HDEL', key, all[j])
  else
    out[#out + 1] = all[j]
    out[#out + 1] = all[j + 1]
    last = math.max(last, exp)
  end
end
if last > 0 then
  redis.call('PEXPIREAT', key, last)
end
return out
