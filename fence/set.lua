-- A fenced write. ARGV[4] the value.
local e = check(true)
if e then return e end
redis.call('HSET', key, 'fence', token, 'value', ARGV[4])
bind()
redis.call('HINCRBY', key, 'writes', 1)
return 1
