-- acquire: take the lock if it is free.
-- KEYS[1] lock key
-- ARGV[1] owner value (128 random bits, hex)
-- ARGV[2] ttl in milliseconds
-- Returns {1} when taken, or {0, pttl} with the holder's remaining time to
-- live in milliseconds (-1 when the key has no expiry). A key of another
-- type than string is not a lock: that is an error, not a holder.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then
  return redis.error_reply('WRONGTYPE lock key ' .. KEYS[1] .. ' holds a ' .. t .. ', not a lock')
end
-- Our own value: this request was already applied once (a client retry
-- after a lost reply). Its expiry was set by that first run, no earlier
-- than this attempt began.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1}
end
return {0, redis.call('PTTL', KEYS[1])}
