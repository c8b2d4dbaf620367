-- A fenced counter change with a floor. ARGV[4] the delta, ARGV[5] the
-- floor ('' for none). The counter is the value field, an integer; a
-- missing one is 0. Lua numbers are doubles: the floor is compared exactly
-- while the counter stays within 2^53 in magnitude; the reply, the
-- counter's decimal string, is exact.
--
-- A client that lost the reply to an Add sends the same call again
-- (go-redis retries a command whose reply timed out), with the same call
-- id, ARGV[2]. The fields added0 to added7 keep the ids and results of the
-- last 8 Adds of the key ('ID=VALUE' each, in a ring: the field added is
-- the slot of the next), each short enough that a small hash keeps Redis's
-- compact encoding (hash-max-listpack-value, 64 bytes). A retry of one of
-- them gets its result, and changes nothing. It is looked up before the
-- fence: the call was current when it was applied.
local v = redis.call('HMGET', key, 'value', 'added', 'added0', 'added1', 'added2', 'added3',
  'added4', 'added5', 'added6', 'added7')
local raw, slot, mark = v[1] or '0', tonumber(v[2] or '0'), call .. '='
for i = 3, 10 do
  if v[i] and string.sub(v[i], 1, #mark) == mark then
    return string.sub(v[i], #mark + 1)
  end
end

-- Nothing is written before the change itself succeeds: HINCRBY still
-- refuses a value Redis does not read as an integer (007, -0) and a change
-- past int64, and a script's writes before an error are not undone.
local e = check(true)
if e then return e end
if not string.match(raw, '^-?%d+$') then
  return redis.error_reply('FENCE_NOTINT ' .. call .. ' ' .. raw)
end
if ARGV[5] ~= '' and tonumber(raw) + tonumber(ARGV[4]) < tonumber(ARGV[5]) then
  redis.call('HINCRBY', key, 'bounded', 1)
  return redis.error_reply('FENCE_BOUND ' .. call .. ' ' .. raw .. ' ' .. ARGV[4] .. ' ' .. ARGV[5])
end
local r = redis.pcall('HINCRBY', key, 'value', ARGV[4])
if type(r) == 'table' and r.err then
  if string.find(r.err, 'overflow', 1, true) then
    return redis.error_reply('FENCE_RANGE ' .. call .. ' ' .. raw .. ' ' .. ARGV[4])
  end
  return redis.error_reply('FENCE_NOTINT ' .. call .. ' ' .. raw)
end
-- The new value in decimal: r is a double, exact below 2^53; past it, as
-- Redis wrote it.
local n
if r < 9007199254740992 and r > -9007199254740992 then
  n = string.format('%.0f', r)
else
  n = redis.call('HGET', key, 'value')
end
redis.call('HSET', key, 'fence', token, 'added' .. slot, mark .. n, 'added', (slot + 1) % 8)
bind()
redis.call('HINCRBY', key, 'writes', 1)
return n
