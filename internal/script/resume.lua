-- resume: claim a handed-off lock (Client.Resume, docs/handoff.md) by
-- rotating its secret: where the node holds the form's secret in the
-- form's kind, the secret becomes the resuming worker's new one, with the
-- same expiry, so that the form's secret holds nothing any more and a
-- second Resume of the same form finds no quorum. The claim leaves a
-- tombstone, <lock>:claimed:<old secret>, which refuses every later claim
-- of that secret on the node even if a late request of the handing Client
-- (a refresh sent before the handoff) writes the old secret back.
-- It also refuses a claim where a later holder of the name can have been
-- granted: the node's fencing counter must exist and, raised to the
-- epoch's floor as an acquire reads it, be at most the form's token
-- (docs/handoff.md, "The fencing token"). Every grant issues or
-- raises the counter above the tokens before it on a quorum (fencing.md's
-- invariant), so a lock whose handing Client's late refreshes re-created
-- it after another holder's tenure finds no quorum to claim. A missing
-- counter is refused too: it reads as its seed (token.lua), above every
-- value it held (fencing.md, Lemma 1). The check applies to the kinds
-- whose holders are ordered by their tokens: a plain lock, an exclusive
-- hold, a reader's hold (ordered after the writers before it) and a
-- permit of a semaphore of one; not to a permit of a semaphore of more,
-- whose counter rises with every permit taken beside it.
-- A claim transfers a vote: the claimed secret counts toward Resume's
-- quorum as an acquire's yes does. So it passes the restart guard as an
-- acquire does (epoch.lua): a node that restarted from a snapshot, or a
-- promoted replica, may hold the form's secret again without the
-- tombstone of a claim it forgot, and answers "recovering" until every
-- lock it may have forgotten has expired (docs/handoff.md, "The claim and
-- the restart guard").
-- KEYS[1] lock key
-- KEYS[2] the lock's fencing counter (counter.lua)
-- KEYS[3] the node's epoch record (as acquire.lua's)
-- ARGV[1] the form's kind: 'p' a plain lock (a string whose value is the
--         secret), 'w' an exclusive hold of the lock family (a writer's or a
--         reentrant owner's), 'r' a reader's hold, 's' a semaphore's permit
-- ARGV[2] 'w': the hold's owner; 's': the semaphore's number of permits;
--         else unused
-- ARGV[3] the form's secret (the plain lock's value, or the hold's ID)
-- ARGV[4] the new secret (128 random bits, hex)
-- ARGV[5] the form's fencing token
-- ARGV[6..10] max_ttl, delta, guard, the fencing counter's expiry (also
--         the tombstone's), the record's expiry: as in acquire.lua
-- Returns {1, ms} when claimed (ms: how long the claimed hold has left on
-- this node), {0, 0} when the node does not hold the secret, {2, ms} when
-- the node is recovering for ms more, {3, 0} when the secret was claimed
-- here already (a tombstone), {4, 0} when the node holds the secret but
-- its counter is missing or, raised to the floor, above the form's token
-- (a later holder's token). Only {1, ms} changes the lock. A node that holds the secret in
-- another kind (another mode, owner or number of permits) answers an
-- error reply starting with REDLOCK_KIND and changes nothing.
local lock, want, arg, old, new = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- The guard's fast path and the counter in one read, as acquire.lua's.
local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
local _, recovering, floor = epoch(KEYS[3], tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[10]), pre[1])
if recovering > 0 then
  return {2, recovering}
end
local tomb = lock .. ':claimed:' .. old
if redis.call('EXISTS', tomb) == 1 then
  return {3, 0}
end
-- later reports whether a holder granted after the form's lock can have
-- drawn a token on this node: the counter missing, or above the token as
-- an acquire reads it, raised to the epoch's floor (token.lua's seen). A
-- counter below the floor was written before the node's epoch began
-- (restored from a snapshot, or replicated to a promoted replica) and may
-- lack a later holder's increments; every token issued in this epoch is
-- above the floor. A permit of a semaphore of more than one is compared
-- with nothing, so the floor does not apply to it either.
local function later()
  if want == 's' and arg ~= '1' then
    return false
  end
  local v = counter(KEYS[2], pre[2])
  return v == nil or math.max(v, floor) > tonumber(ARGV[5])
end
local function wrong(what)
  return redis.error_reply('REDLOCK_KIND ' .. lock .. ': the handed-off lock is ' .. what .. ', not what the form says')
end
local t = redis.call('TYPE', lock)['ok']
if t == 'string' then
  if redis.call('GET', lock) ~= old then
    return {0, 0}
  end
  if want ~= 'p' then
    return wrong('a plain lock')
  end
  local pttl = redis.call('PTTL', lock)
  if pttl <= 0 then
    return {0, 0}
  end
  if later() then
    return {4, 0}
  end
  redis.call('SET', lock, new, 'PX', pttl)
  redis.call('SET', tomb, '1', 'PX', ARGV[9])
  return {1, pttl}
end
if t ~= 'hash' then
  return {0, 0}
end
local now = node_now()
local cur = live(lock, now)
if cur == nil then
  return {0, 0}
end
local exp = tonumber(redis.call('HGET', lock, 'h:' .. old))
if exp == nil then
  return {0, 0} -- absent, or pruned by live() as expired
end
if want == 'p' then
  return wrong('a hold of mode ' .. tostring(cur.mode))
end
if cur.mode ~= want then
  return wrong('of mode ' .. tostring(cur.mode))
end
if want == 'w' and cur.o ~= arg then
  return wrong('of another owner')
end
if want == 's' and cur.k ~= arg then
  return wrong('a permit of a semaphore of ' .. tostring(cur.k) .. ' permits')
end
if later() then
  return {4, 0}
end
redis.call('HDEL', lock, 'h:' .. old)
redis.call('HSET', lock, 'h:' .. new, string.format('%d', exp))
redis.call('SET', tomb, '1', 'PX', ARGV[9])
return {1, exp - now}
