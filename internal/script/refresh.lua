-- refresh: compare-and-pexpire, re-seeding a node that lost the key.
-- KEYS[1] lock key
-- KEYS[2] the node's epoch record
-- KEYS[3] the lock's fencing counter (counter.lua)
-- ARGV[1] owner value
-- ARGV[2] new ttl in milliseconds
-- ARGV[3..7] max_ttl, delta, guard, (unused), record expiry: as in acquire
-- ARGV[8] the lock's fencing token
-- Returns 1 when the key held our value (its expiry is now at least the new
-- ttl), 2 when the key was missing and was set again with our value
-- (re-seed), 0 when another owner holds it, 3 when it was missing but the
-- node is recovering and may not vote, 4 when it was missing and the
-- node's counter is above our token (retired): the lock was released
-- there (release.lua), or the node voted for a later lock, since our token
-- was issued.
--
-- The expiry is never shortened: a delayed, older refresh with a shorter
-- ttl must not cut the keys of a later one that already won. The client
-- computes validity from the ttl it sent, so a key that lives longer only
-- keeps others out a little longer.
-- An extension is a vote too: only from the node the Client identified.
node_is(KEYS[2], ARGV[5])
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
if v == false then
  -- A re-seed is a vote, like an acquire. Not where our token was
  -- retired: every release raises the counter above the lock's token
  -- (release.lua), so a refresh that lands after the release, delayed in
  -- the network, does not bring the released lock back; a node that lost
  -- its data has no counter, and is re-seeded once it has recovered. And
  -- not from a recovering node.
  local c = counter(KEYS[3])
  if c ~= nil and c > tonumber(ARGV[8]) then
    return 4
  end
  local _, recovering = epoch(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[7]))
  if recovering > 0 then
    return 3
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
