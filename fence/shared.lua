-- A shared read, by a holder of a read lock: readers overlap and are not
-- ordered among themselves, so only an exclusive holder's newer token
-- refuses it. It records the highest reader token, so that an exclusive
-- holder older than a reader can no longer write.
local e = check(false)
if e then return e end
if not f[2] or cmp(token, f[2]) > 0 then
  redis.call('HSET', key, 'shared', token)
end
bind()
return redis.call('HGET', key, 'value')
