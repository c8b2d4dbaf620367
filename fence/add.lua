-- A fenced counter change with a floor. ARGV[3] the delta, ARGV[4] the
-- floor ('' for none). The counter is the value field, an integer; a
-- missing one is 0. Lua numbers are doubles: the floor is compared exactly
-- while the counter stays within 2^53 in magnitude.
--
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
local n = redis.pcall('HINCRBY', key, 'value', ARGV[3])
if type(n) == 'table' and n.err then
  if string.find(n.err, 'overflow', 1, true) then
    return redis.error_reply('FENCE_RANGE ' .. call .. ' ' .. raw .. ' ' .. ARGV[3])
  end
  return redis.error_reply('FENCE_NOTINT ' .. call .. ' ' .. raw)
end
raise()
redis.call('HINCRBY', key, 'writes', 1)
return n
