-- permit: take one permit of a semaphore of k permits (Client.Semaphore,
-- docs/safety.md, "Semaphores"). The semaphore is a hash, like the lock
-- family's (family.lua), and shares holds.lua's live() with it:
--   mode    's'
--   k       the number of permits, fixed while any permit is live
--   h:HOLD  one field per permit held: its expiry, node milliseconds
-- A permit whose expiry has passed is gone: live() prunes it against the
-- node's TIME before anything is counted, so an expired permit is taken
-- back by the node itself, never by its holder. The key's own expiry is
-- the latest permit's. The node admits at most k live permits: that is the
-- whole of its part in the semaphore's safety; the client's quorum of
-- floor(n*k/(k+1))+1 nodes does the rest (docs/safety.md).
-- KEYS[1] semaphore key
-- KEYS[2] fencing counter (counter.lua)
-- KEYS[3] the node's epoch record
-- ARGV[1] k
-- ARGV[2] permit (128 random bits, hex)
-- ARGV[3] ttl in milliseconds
-- ARGV[4..8] max_ttl, delta, guard, fencing counter expiry, epoch record
--         expiry: as in acquire.lua
-- Returns {1, token} when the permit was taken (or was already ours: a
-- retried request), {0, ms} when all k permits are live (ms: until the
-- soonest of them expires), {2, ms} when the node is recovering. A plain
-- lock, a lock of the family or a hash of any mode but 's' on the name is
-- an error reply starting with REDLOCK_KIND; a semaphore in use with another k, REDLOCK_PERMITS.
local lock, k, hold = KEYS[1], tonumber(ARGV[1]), 'h:' .. ARGV[2]
local ttl = tonumber(ARGV[3])
local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
local _, recovering, floor = epoch(KEYS[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[8]), pre[1])
if recovering > 0 then
  return {2, recovering}
end
local now = node_now()
local cur = live(lock, now)
if cur ~= nil then
  if cur.mode ~= 's' then
    kind_error(lock, cur.mode, 'a semaphore')
  end
  if tonumber(cur.k) ~= k then
    error({err = 'REDLOCK_PERMITS ' .. lock .. ' is a semaphore of ' .. cur.k .. ' permits in use, not ' .. ARGV[1]})
  end
  if redis.call('HEXISTS', lock, hold) == 1 then
    -- Our own permit: this request was already applied once (a client
    -- retry after a lost reply), and so was the counter, reported as an
    -- issue would see it (token.lua's current).
    return {1, current(KEYS[2], pre[2], now, floor, ARGV[7])}
  end
  if cur.holds >= k then
    -- Full: mark the semaphore as waited for, so that the next release
    -- publishes (permitrelease.lua), and say when a permit expires.
    redis.call('SET', lock .. ':waiters', '1', 'PX', ARGV[7])
    local all, soonest = redis.call('HGETALL', lock), nil
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'h:' then
        local e = tonumber(all[i + 1])
        if soonest == nil or e < soonest then
          soonest = e
        end
      end
    end
    return {0, soonest - now}
  end
end
-- Take the permit, issuing a token (token.lua).
local v = issue(KEYS[2], pre[2], now, floor, ARGV[7])
if cur == nil then
  redis.call('HSET', lock, 'mode', 's', 'k', ARGV[1], hold, string.format('%d', now + ttl))
  redis.call('PEXPIRE', lock, ttl)
else
  redis.call('HSET', lock, hold, string.format('%d', now + ttl))
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
  end
end
return {1, v}
