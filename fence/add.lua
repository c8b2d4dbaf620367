-- A fenced counter change with a floor. ARGV[2] the delta, ARGV[3] the
-- floor ('' for none). The counter is the value field, an integer; a
-- missing one is 0. Lua numbers are doubles: the floor is compared exactly
-- while the counter stays within 2^53 in magnitude.
local e = check(true)
if e then return e end
local raw = redis.call('HGET', key, 'value') or '0'
if not string.match(raw, '^-?%d+$') then
  return redis.error_reply('FENCE_NOTINT ' .. raw)
end
if ARGV[3] ~= '' and tonumber(raw) + tonumber(ARGV[2]) < tonumber(ARGV[3]) then
  redis.call('HINCRBY', key, 'bounded', 1)
  return redis.error_reply('FENCE_BOUND ' .. raw .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
end
raise()
redis.call('HINCRBY', key, 'writes', 1)
return redis.call('HINCRBY', key, 'value', ARGV[2])
