-- token: a lock's fencing counter as every script reads and raises it
-- (acquire.lua, family.lua, permit.lua; fence.lua and seal.lua). Needs
-- epoch.lua (node_now) and counter.lua.
--
-- The counter never runs backwards. Missing (a new lock, or expired after
-- its whole expiry of disuse), it starts from its seed, the node's time
-- rounded down to the second x 1024 (never below the epoch's floor).
-- Below the epoch's floor (written before the node's epoch began: restored
-- from disk, or replicated from an old master, so it may lack increments),
-- it counts as the floor, the end of the epoch's recovery x 1024. Either
-- is above every token issued before, as long as clocks are within max_ttl
-- of each other and no lock is taken 1024 times a ms (docs/fencing.md,
-- Lemma 2). Every script that reports a counter or issues a token reads it
-- through seen(), so that no path reports a raw counter.

-- seed is a missing counter's first value at node time now (ms): the
-- time rounded down to the second, x 1024. Rounded, nodes whose clocks
-- agree within a second seed a new lock's counters alike (but across a
-- second's edge), so that its first acquire's votes agree and need no
-- second round; the second it loses is within Lemma 1's margin (the
-- counter's expiry, at least an hour: docs/fencing.md). retire.lua seeds
-- the same way.
local function seed(now)
  return (now - now % 1000) * 1024
end

-- seen returns the counter as a token's issue sees it: missing, its seed
-- (never below floor); below floor, the floor. key is the counter, cur
-- its value as read (counter.lua), now the node's time in ms when the
-- caller read it already (nil: read TIME only if the counter is missing),
-- floor the epoch's (epoch.lua). The second result is true when that
-- differs from what the key holds.
local function seen(key, cur, now, floor)
  local v = counter(key, cur)
  if v == nil then
    return math.max(seed(now or node_now()), floor), true
  end
  if v < floor then
    return floor, true
  end
  return v, false
end

-- issue issues the lock's next token: one more than seen(), written with
-- the counter's expiry ttl (ms), which every issue renews. Returns it.
local function issue(key, cur, now, floor, ttl)
  local v = seen(key, cur, now, floor) + 1
  redis.call('SET', key, string.format('%d', v), 'PX', ttl)
  return v
end

-- current returns seen() without issuing, for a vote that issues nothing
-- (a re-entry, a retried request): what it reports is written when it
-- differs from the key (a seeded or raised counter, with the counter's
-- expiry ttl), so that a node's counter is never below a value it
-- reported. A counter as it is stays as it is, its expiry too.
local function current(key, cur, now, floor, ttl)
  local v, changed = seen(key, cur, now, floor)
  if changed then
    redis.call('SET', key, string.format('%d', v), 'PX', ttl)
  end
  return v
end

-- raise is the second round's (fence.lua, seal.lua): the counter to at
-- least token. A missing counter is seeded from the node's time first, so
-- that a raise delayed past the counter's expiry cannot write an old
-- token into it (the next issue would count on from there). Only a write
-- sets the expiry ttl. The floor is not applied: every read applies it
-- (seen), and a raise needs no guard arguments.
local function raise(key, token, ttl)
  local v = counter(key)
  if v == nil then
    v = math.max(seed(node_now()), token)
  elseif v < token then
    v = token
  else
    return
  end
  redis.call('SET', key, string.format('%d', v), 'PX', ttl)
end
