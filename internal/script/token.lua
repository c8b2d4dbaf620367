-- token: issue a lock's next fencing token (acquire.lua, family.lua,
-- permit.lua). Needs epoch.lua (node_now) and counter.lua.
--
-- The counter never runs backwards. Missing (a new lock, or expired after
-- its whole expiry of disuse), it starts from the node's time x 1024.
-- Below the epoch's floor (written before the node's epoch began: restored
-- from disk, or replicated from an old master, so it may lack increments),
-- it is raised to the floor, the end of the epoch's recovery x 1024. Either
-- is above every token issued before, as long as clocks are within max_ttl
-- of each other and no lock is taken 1024 times a ms (docs/fencing.md,
-- Lemma 2).
--
-- key is the counter, cur its value as read (counter.lua), now the node's
-- time in ms when the caller read it already (nil: read TIME only if the
-- counter is missing), floor the epoch's (epoch.lua), ttl the counter's
-- expiry in ms, renewed by every issue. Returns the token.
local function issue(key, cur, now, floor, ttl)
  local v = counter(key, cur)
  if v == nil then
    v = (now or node_now()) * 1024
  elseif v < floor then
    v = floor
  end
  v = v + 1
  redis.call('SET', key, string.format('%d', v), 'PX', ttl)
  return v
end
