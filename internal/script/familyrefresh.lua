-- familyrefresh: extend one hold of a lock of the family (family.lua),
-- re-seeding a node that lost it.
-- KEYS[1] lock key
-- KEYS[2] the node's epoch record
-- ARGV[1] mode: 'w' or 'r'
-- ARGV[2] owner ('w'; '' for 'r')
-- ARGV[3] hold
-- ARGV[4] new ttl in milliseconds
-- ARGV[5..9] max_ttl, delta, guard, (unused), record expiry: as in acquire
-- Returns what refresh.lua returns: 1 extended, 2 re-seeded, 0 not ours
-- (another owner, or the other mode), 3 missing but recovering.
--
-- The caller's hold is valid on a quorum (the client checks), so no
-- conflicting hold can exist on any node in the meantime: a node where the
-- lock is free, or held in our mode by our owner (or by readers, for a
-- reader), may take the hold again, as refresh.lua re-seeds a lost key.
-- The hold's expiry and the key's are never shortened. A re-seed records
-- no token for the owner: only an acquire's first round or its seal does
-- (docs/lock-family.md), so a re-entry that meets it opens a new tenure.
local lock, mode, owner, hold = KEYS[1], ARGV[1], ARGV[2], 'h:' .. ARGV[3]
local ttl = tonumber(ARGV[4])
local now = node_now()
local cur = live(lock, now)
if cur == nil then
  local _, recovering = epoch(KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[9]))
  if recovering > 0 then
    return 3
  end
  if mode == 'w' then
    redis.call('HSET', lock, 'mode', 'w', 'o', owner, hold, string.format('%d', now + ttl))
  else
    redis.call('HSET', lock, 'mode', 'r', hold, string.format('%d', now + ttl))
  end
  redis.call('PEXPIRE', lock, ttl)
  return 2
end
if cur.mode ~= mode or (mode == 'w' and cur.o ~= owner) then
  return 0
end
local exp = tonumber(redis.call('HGET', lock, hold))
if exp == nil or exp < now + ttl then
  redis.call('HSET', lock, hold, string.format('%d', now + ttl))
end
if redis.call('PTTL', lock) < ttl then
  redis.call('PEXPIRE', lock, ttl)
end
return 1
