-- acquire: take the lock if it is free, and issue its fencing token.
-- KEYS[1] lock key
-- KEYS[2] fencing counter of the lock (counter.lua)
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
-- recovering for ms more. A key of another type is an error, not a holder:
-- REDLOCK_KIND for a hash (a lock of the family, family.lua, a semaphore,
-- permit.lua, or a kind this version does not know), else WRONGTYPE.
-- One read for the guard's fast path and the counter: every key of the
-- lock shares its hash tag, and on a standalone node there are no slots.
local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
local now, recovering, floor = epoch(KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[7]), pre[1])
if recovering > 0 then
  return {2, recovering}
end
-- Free: take it, and issue the next token (token.lua).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, issue(KEYS[2], pre[2], now, floor, ARGV[6])}
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'hash' then
  local m = redis.call('HGET', KEYS[1], 'mode')
  local held = 'a lock of a kind this version does not know (mode ' .. tostring(m) .. ')'
  if m == 'w' or m == 'r' then
    held = 'a read-write or reentrant lock (Client.RWMutex or Client.Reentrant)'
  elseif m == 's' then
    held = 'a semaphore (Client.Semaphore)'
  end
  return redis.error_reply('REDLOCK_KIND ' .. KEYS[1] .. ' is held by ' .. held .. ', not a plain lock')
end
if t ~= 'string' then
  return redis.error_reply('WRONGTYPE lock key ' .. KEYS[1] .. ' holds a ' .. t .. ', not a lock')
end
-- Our own value: this request was already applied once (a client retry
-- after a lost reply). Its expiry was set by that first run, no earlier
-- than this attempt began, and so was the counter, which it reports as an
-- issue would see it (token.lua's current).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, current(KEYS[2], pre[2], now, floor, ARGV[6])}
end
-- Held by another owner: mark the lock as waited for, so that its release
-- publishes (release.lua). The mark outlives any wait between two attempts
-- (it expires with the fencing counter), and each refused attempt renews it.
redis.call('SET', KEYS[1] .. ':waiters', '1', 'PX', ARGV[6])
return {0, redis.call('PTTL', KEYS[1])}
