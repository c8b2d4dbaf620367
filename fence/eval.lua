-- The head of a caller's script run under a current token (Redis.Eval):
-- the check and the fence's raise, then the caller's script, which sees
-- its own KEYS and ARGV (without the fence's key, token, call id and lock).
local e = check(true)
if e then return e end
raise()
redis.call('HINCRBY', key, 'writes', 1)
local userKeys, userArgs = {}, {}
for i = 2, #KEYS do userKeys[i - 1] = KEYS[i] end
for i = 4, #ARGV do userArgs[i - 3] = ARGV[i] end
return (function(KEYS, ARGV)
