-- acquire: take the lock if it is free, and issue its fencing token.
-- KEYS[1] lock key
-- KEYS[2] fencing counter of the lock (a hash: v = value, e = epoch id)
-- KEYS[3] the node's epoch record
-- ARGV[1] owner value (128 random bits, hex)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] max_ttl in milliseconds (the recovery window)
-- ARGV[4] delta: how long an identity check is trusted, milliseconds
-- ARGV[5] guard: '1', 'p' or '0' (see epoch.lua)
-- ARGV[6] expiry of the fencing counter, milliseconds
-- ARGV[7] expiry of the epoch record, milliseconds (0: none)
-- Returns {1, token} when taken, {0, pttl} when held by another owner
-- (pttl -1 when the key has no expiry), or {2, ms} when the node is
-- recovering for ms more. A key of another type is an error, not a holder.
local now, recovering, id = epoch(KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[7]))
if recovering > 0 then
  return {2, recovering}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- The counter never runs backwards. Missing (new lock, expired, data
  -- lost) or written in an older epoch of this node (restored from disk,
  -- or replicated from an old master), it is first raised to the node's
  -- time x 1024: above every token issued before, as long as clocks are
  -- within max_ttl of each other and no lock is taken 1024 times a ms.
  local f = redis.call('HMGET', KEYS[2], 'v', 'e')
  local v = tonumber(f[1])
  if v == nil or f[2] ~= id then
    v = math.max(v or 0, now * 1024)
  end
  v = v + 1
  redis.call('HSET', KEYS[2], 'v', string.format('%d', v), 'e', id)
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return {1, v}
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then
  return redis.error_reply('WRONGTYPE lock key ' .. KEYS[1] .. ' holds a ' .. t .. ', not a lock')
end
-- Our own value: this request was already applied once (a client retry
-- after a lost reply). Its expiry was set by that first run, no earlier
-- than this attempt began, and so was the counter.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('HGET', KEYS[2], 'v')) or 0}
end
return {0, redis.call('PTTL', KEYS[1])}
