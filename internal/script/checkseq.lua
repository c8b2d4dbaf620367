-- checkseq: what one node says of a lock's sequencer (Client.Check,
-- docs/fencing.md, "Checking a sequencer"): whether the lock is held here
-- in the sequencer's kind, and whether its latest token here is the
-- sequencer's. It changes nothing of the lock: it reads the lock's key and
-- its fencing counter, without pruning a hash's expired holds, after the
-- restart guard (epoch.lua), which may start a new epoch in the node's
-- record as for any call, so that a node that restarted or was promoted
-- answers "recovering" and vouches for nothing.
-- KEYS[1] lock key
-- KEYS[2] the lock's fencing counter (counter.lua)
-- KEYS[3] the node's epoch record (as acquire.lua's)
-- ARGV[1] the sequencer's kind: 'p' a plain lock (a string), 'w' an
--         exclusive hold of the lock family (a writer's or a reentrant
--         owner's), 'r' a reader's hold, 's' a semaphore's permit
-- ARGV[2] the sequencer's token, in decimal
-- ARGV[3..7] max_ttl, delta, guard, the fencing counter's expiry, the
--         record's expiry: as in acquire.lua
-- Returns {1, 0} when the lock is held here in that kind and its latest
-- token is the sequencer's: the counter (the recorded owner's token, t,
-- for an exclusive hold), at or above the epoch's floor, equals it.
-- {0, why} when it is not: why 0, the lock is not held here (no key, or
-- no live hold); 1, it is held in another kind; 2, its latest token is
-- another (a later one, or the sequencer's was never the latest here).
-- {2, ms} when the node is recovering for ms more: it vouches for nothing.
-- {3, 0} when the lock is held but the node no longer knows its token: the
-- counter (or the recorded token) is missing, or below the epoch's floor
-- (written before the node's epoch began, restored from a snapshot or
-- copied to a promoted replica), as after a re-seed by a refresh; it
-- vouches for nothing either.
local lock, want, token = KEYS[1], ARGV[1], ARGV[2]
local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
local _, recovering, floor = epoch(KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[7]), pre[1])
if recovering > 0 then
  return {2, recovering}
end

-- judge compares the latest token v (a number, or nil when missing) with
-- the sequencer's, exactly: tokens stay below 2^53, where %d is exact, and
-- a longer decimal is never equal.
local function judge(v)
  if v == nil or v < floor then
    return {3, 0}
  end
  if string.format('%d', v) == token then
    return {1, 0}
  end
  return {0, 2}
end

local t = redis.call('TYPE', lock)['ok']
if t == 'string' then
  if want ~= 'p' then
    return {0, 1}
  end
  return judge(counter(KEYS[2], pre[2]))
end
if t ~= 'hash' then
  return {0, 0}
end
local all = redis.call('HGETALL', lock)
local now = node_now()
local mode, rec, live = nil, nil, 0
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if string.sub(f, 1, 2) == 'h:' then
    if tonumber(v) > now then
      live = live + 1
    end
  elseif f == 'mode' then
    mode = v
  elseif f == 't' then
    rec = v
  end
end
if live == 0 then
  return {0, 0}
end
if mode ~= want then
  return {0, 1}
end
if want == 'w' then
  return judge(tonumber(rec))
end
return judge(counter(KEYS[2], pre[2]))
