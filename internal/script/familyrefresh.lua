-- familyrefresh: extend one hold of a lock of the family (family.lua),
-- re-seeding a node that lost it.
-- KEYS[1] lock key
-- KEYS[2] the node's epoch record
-- KEYS[3] the lock's fencing counter (counter.lua)
-- ARGV[1] mode: 'w' or 'r'
-- ARGV[2] owner ('w'; '' for 'r')
-- ARGV[3] hold
-- ARGV[4] new ttl in milliseconds
-- ARGV[5..9] max_ttl, delta, guard, (unused), record expiry: as in acquire
-- ARGV[10] the hold's fencing token
-- Returns what refresh.lua returns: 1 extended (the node has the hold), 2
-- re-seeded (the hold was missing, and was taken again: in a new hash, or
-- beside the holds of its mode and owner there), 0 not ours (another
-- owner, or the other mode), 3 missing but recovering, 4 missing and the
-- hold's token retired (the counter is above it).
--
-- The caller's hold is valid on a quorum (the client checks), so no
-- conflicting hold can exist on any node in the meantime: a node where the
-- lock is free, or held in our mode by our owner (or by readers, for a
-- reader), may take the hold again, as refresh.lua re-seeds a lost key.
-- Taking it again is a vote, whether the hash is there or not: not where
-- the hold's token was retired (a release raises the counter above it,
-- familyrelease.lua, so that a refresh delayed past the release does not
-- bring the hold back), and not from a recovering node. Only the extension
-- of a hold the node has passes without the guard: refusing it would drop
-- every held lock in a rolling restart.
-- The hold's expiry and the key's are never shortened. A re-seed records
-- no token for the owner: only an acquire's first round or its seal does
-- (docs/lock-family.md), so a re-entry that meets it opens a new tenure.
-- An extension is a vote too: only from the node the Client identified.
node_is(KEYS[2], ARGV[7])
local lock, mode, owner, hold = KEYS[1], ARGV[1], ARGV[2], 'h:' .. ARGV[3]
local ttl = tonumber(ARGV[4])
local now = node_now()
local cur = live(lock, now)
if cur ~= nil and (cur.mode ~= mode or (mode == 'w' and cur.o ~= owner)) then
  return 0
end
local exp = nil
if cur ~= nil then
  -- Live, or missing (live() pruned it otherwise).
  exp = tonumber(redis.call('HGET', lock, hold))
end
if exp ~= nil then
  if exp < now + ttl then
    redis.call('HSET', lock, hold, string.format('%d', now + ttl))
  end
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
  end
  return 1
end
local c = counter(KEYS[3])
if c ~= nil and c > tonumber(ARGV[10]) then
  return 4
end
local _, recovering = epoch(KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[9]))
if recovering > 0 then
  return 3
end
if cur == nil then
  if mode == 'w' then
    redis.call('HSET', lock, 'mode', 'w', 'o', owner, hold, string.format('%d', now + ttl))
  else
    redis.call('HSET', lock, 'mode', 'r', hold, string.format('%d', now + ttl))
  end
  redis.call('PEXPIRE', lock, ttl)
  return 2
end
redis.call('HSET', lock, hold, string.format('%d', now + ttl))
if redis.call('PTTL', lock) < ttl then
  redis.call('PEXPIRE', lock, ttl)
end
return 2
