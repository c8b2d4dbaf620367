-- A fenced read: it records the reader's token, so that an older holder
-- can no longer write after it (the read-modify-write trap).
local e = check(true)
if e then return e end
raise()
return redis.call('HGET', key, 'value')
