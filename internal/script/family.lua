-- family: acquire a hold of a read-write or reentrant lock (the lock
-- family, docs/lock-family.md). The lock key is a hash:
--   mode    'w' (one exclusive owner) or 'r' (shared by readers)
--   o       the exclusive owner (mode 'w')
--   t       the exclusive owner's fencing token (mode 'w')
--   h:HOLD  one field per hold: its expiry, node milliseconds
-- A hold whose expiry has passed is gone: the scripts prune it, and delete
-- the key when no hold is left. The key's own expiry is the latest hold's.
-- KEYS[1] lock key
-- KEYS[2] fencing counter of the lock (counter.lua)
-- KEYS[3] the node's epoch record
-- ARGV[1] mode: 'w' or 'r'
-- ARGV[2] owner ('w'; '' for 'r')
-- ARGV[3] hold (128 random bits, hex)
-- ARGV[4] ttl in milliseconds
-- ARGV[5..9] max_ttl, delta, guard, fencing counter expiry, epoch record
--         expiry: as in acquire.lua
-- ARGV[10] the value of the writer's mark ('w'): one per obtain, so that
--         a writer that gives up deletes its own mark only (withdraw.lua)
-- Returns {1, token, existed, counter} when the hold was taken: existed is 1
-- when the owner already held the lock exclusively on this node (a
-- re-entry: token is the owner's recorded token, counter the node's
-- counter as an issue would see it, seeded or raised to the floor but not
-- incremented), 0 when this call issued token (counter == token). Returns {0, pttl} when refused (held in a conflicting mode, or a
-- reader behind a waiting writer; pttl is how long that lasts at most), or
-- {2, ms} when the node is recovering. A plain lock (a string), a
-- semaphore (permit.lua) or a hash of any mode but 'w' and 'r' on the name
-- is an error reply starting with REDLOCK_KIND.
local lock, mode, owner, hold = KEYS[1], ARGV[1], ARGV[2], 'h:' .. ARGV[3]
local ttl = tonumber(ARGV[4])
local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
local _, recovering, floor = epoch(KEYS[3], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[9]), pre[1])
if recovering > 0 then
  return {2, recovering}
end
local now = node_now()
local cur = live(lock, now)
if cur ~= nil and cur.mode ~= 'w' and cur.mode ~= 'r' then
  kind_error(lock, cur.mode, 'a read-write or reentrant lock')
end
local writer = lock .. ':wwait'

-- refuse marks the lock as waited for (release.lua publishes when it finds
-- the mark), and a refused writer makes later readers wait behind it.
local function refuse(pttl)
  redis.call('SET', lock .. ':waiters', '1', 'PX', ARGV[8])
  if mode == 'w' then
    redis.call('SET', writer, ARGV[10], 'PX', ARGV[4])
  end
  return {0, pttl}
end

if cur ~= nil then
  if cur.mode == 'w' then
    if mode == 'w' and cur.o == owner then
      -- Re-entry: one more hold of the owner's lock.
      redis.call('HSET', lock, hold, string.format('%d', now + ttl))
      if redis.call('PTTL', lock) < ttl then
        redis.call('PEXPIRE', lock, ttl)
      end
      -- The counter as a token's issue would see it (token.lua's
      -- current): an expired counter reported as 0, or one below the
      -- floor as it is, would make the client's rule 2 issue a token
      -- below those issued before (docs/lock-family.md).
      return {1, tonumber(cur.t) or 0, 1, current(KEYS[2], pre[2], now, floor, ARGV[8])}
    end
    return refuse(redis.call('PTTL', lock))
  end
  -- Shared: a writer waits for the readers; a reader joins them unless a
  -- writer waits.
  if mode == 'w' then
    return refuse(redis.call('PTTL', lock))
  end
  local wait = redis.call('PTTL', writer)
  if wait > 0 then
    return refuse(wait)
  end
elseif mode == 'r' then
  local wait = redis.call('PTTL', writer)
  if wait > 0 then
    return refuse(wait)
  end
end

-- Take the hold, issuing a token (token.lua).
local v = issue(KEYS[2], pre[2], now, floor, ARGV[8])
if cur == nil then
  if mode == 'w' then
    redis.call('HSET', lock, 'mode', 'w', 'o', owner, 't', string.format('%d', v), hold, string.format('%d', now + ttl))
    -- The writer that was waited for is in: later readers no longer wait
    -- for it (another waiting writer marks again at its next attempt).
    redis.call('DEL', writer)
  else
    redis.call('HSET', lock, 'mode', 'r', hold, string.format('%d', now + ttl))
  end
  redis.call('PEXPIRE', lock, ttl)
else
  redis.call('HSET', lock, hold, string.format('%d', now + ttl))
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
  end
end
return {1, v, 0, v}
