-- A fenced counter change with a floor. ARGV[3] the delta, ARGV[4] the
-- floor ('' for none). The counter is the value field, an integer; a
-- missing one is 0. Lua numbers are doubles: the floor is compared exactly
-- while the counter stays within 2^53 in magnitude; the reply, the
-- counter's decimal string, is exact.
--
-- A client that lost the reply to an Add sends the same call again
-- (go-redis retries a command whose reply timed out), with the same call
-- id, ARGV[2]. The field added keeps the ids and results of the last 16
-- Adds of the key (';ID=VALUE' each): a retry of one of them gets its
-- result, and changes nothing. It is looked up before the fence: the call
-- was current when it was applied.
local added = redis.call('HGET', key, 'added') or ''
local done = string.match(added, ';' .. call .. '=(-?%d+)')
if done then return done end

-- Nothing is written before the change itself succeeds: HINCRBY still
-- refuses a value Redis does not read as an integer (007, -0) and a change
-- past int64, and a script's writes before an error are not undone.
local e = check(true)
if e then return e end
local raw = redis.call('HGET', key, 'value') or '0'
if not string.match(raw, '^-?%d+$') then
  return redis.error_reply('FENCE_NOTINT ' .. call .. ' ' .. raw)
end
if ARGV[4] ~= '' and tonumber(raw) + tonumber(ARGV[3]) < tonumber(ARGV[4]) then
  redis.call('HINCRBY', key, 'bounded', 1)
  return redis.error_reply('FENCE_BOUND ' .. call .. ' ' .. raw .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
end
local r = redis.pcall('HINCRBY', key, 'value', ARGV[3])
if type(r) == 'table' and r.err then
  if string.find(r.err, 'overflow', 1, true) then
    return redis.error_reply('FENCE_RANGE ' .. call .. ' ' .. raw .. ' ' .. ARGV[3])
  end
  return redis.error_reply('FENCE_NOTINT ' .. call .. ' ' .. raw)
end
raise()
redis.call('HINCRBY', key, 'writes', 1)
-- The new value as Redis wrote it: r, a double, is not exact past 2^53.
local n = redis.call('HGET', key, 'value')
added = added .. ';' .. call .. '=' .. n
local _, count = string.gsub(added, ';', '')
if count > 16 then
  local second = string.find(added, ';', 2, true)
  added = string.sub(added, second)
end
redis.call('HSET', key, 'added', added)
return n
