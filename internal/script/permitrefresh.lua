-- permitrefresh: extend one permit of a semaphore (permit.lua), re-seeding
-- a node that lost it when the node may vote and has a permit free.
-- KEYS[1] semaphore key
-- KEYS[2] the node's epoch record
-- KEYS[3] the semaphore's fencing counter (counter.lua)
-- ARGV[1] k
-- ARGV[2] permit
-- ARGV[3] new ttl in milliseconds
-- ARGV[4..8] max_ttl, delta, guard, (unused), record expiry: as in acquire
-- ARGV[9] the permit's fencing token
-- Returns what refresh.lua returns: 1 extended, 2 re-seeded, 0 not ours
-- (the name is a lock of the family), 3 the permit is gone from the node
-- and was not taken again (the node is recovering, all its permits are
-- taken, or the semaphore there has another k), 4 the permit is gone and
-- its token retired (the counter is above it: the permit was released
-- there, permitrelease.lua, or a later permit was taken or released
-- since): no vote either way.
--
-- Unlike a lock's re-seed, a permit's is not free of conflict just because
-- the permit is valid on a quorum: other permits live on the node besides
-- ours. So the re-seed is an acquire without a token: it counts the live
-- permits first, and the node never holds more than k (docs/safety.md).
-- The permit's expiry and the key's are never shortened.
-- An extension is a vote too: only from the node the Client identified.
node_is(KEYS[2], ARGV[6])
local lock, k, hold = KEYS[1], tonumber(ARGV[1]), 'h:' .. ARGV[2]
local ttl = tonumber(ARGV[3])
local now = node_now()
local cur = live(lock, now)
if cur ~= nil and cur.mode ~= 's' then
  return 0
end
if cur ~= nil then
  local exp = tonumber(redis.call('HGET', lock, hold))
  if exp ~= nil then
    -- Live (live() pruned it otherwise).
    if exp < now + ttl then
      redis.call('HSET', lock, hold, string.format('%d', now + ttl))
    end
    if redis.call('PTTL', lock) < ttl then
      redis.call('PEXPIRE', lock, ttl)
    end
    return 1
  end
  if tonumber(cur.k) ~= k or cur.holds >= k then
    return 3
  end
end
local c = counter(KEYS[3])
if c ~= nil and c > tonumber(ARGV[9]) then
  return 4
end
local _, recovering = epoch(KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[8]))
if recovering > 0 then
  return 3
end
if cur == nil then
  redis.call('HSET', lock, 'mode', 's', 'k', ARGV[1], hold, string.format('%d', now + ttl))
  redis.call('PEXPIRE', lock, ttl)
else
  redis.call('HSET', lock, hold, string.format('%d', now + ttl))
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
  end
end
return 2
