-- A poisoned fence's reset, by an operator (Redis.Reset): the record's
-- fence becomes ARGV[1] ('' for none) and the lock it follows ARGV[2] (''
-- for none); the highest shared reader's token is forgotten. The value and
-- the counts stay. Nothing is checked: it is the way out of a fence that
-- no holder can pass.
local key = KEYS[1]
redis.call('HDEL', key, 'shared')
if ARGV[1] == '' then
  redis.call('HDEL', key, 'fence')
else
  redis.call('HSET', key, 'fence', ARGV[1])
end
if ARGV[2] == '' then
  redis.call('HDEL', key, 'lock')
else
  redis.call('HSET', key, 'lock', ARGV[2])
end
return 1
