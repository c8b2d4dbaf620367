-- A fenced write. ARGV[3] the value.
local e = check(true)
if e then return e end
redis.call('HSET', key, 'fence', token, 'value', ARGV[3])
redis.call('HINCRBY', key, 'writes', 1)
return 1
