-- permitrelease: give back one permit of a semaphore (permit.lua), and
-- tell the waiters when a permit is free.
-- KEYS[1] semaphore key
-- ARGV[1] permit
-- ARGV[2] release channel; '' publishes nothing (clean-up)
-- ARGV[3] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- Returns deleted + 2 x receivers, as release.lua: deleted is 1 when the
-- permit was ours and is gone now. When a permit is free afterwards and the
-- semaphore was waited for (a refused permit.lua left the mark), the
-- release publishes and takes the mark.
local lock, hold = KEYS[1], 'h:' .. ARGV[1]
local now = node_now()
local cur = live(lock, now)
local deleted = 0
if cur ~= nil then
  if cur.mode ~= 's' then
    return 0
  end
  deleted = redis.call('HDEL', lock, hold)
  if deleted == 1 and cur.holds == 1 then
    redis.call('DEL', lock)
  end
  if deleted == 0 and cur.holds >= tonumber(cur.k) then
    return 0 -- still full: nothing to tell
  end
end
if ARGV[2] == '' then
  return deleted
end
if redis.call('DEL', lock .. ':waiters') == 0 then
  return deleted
end
local cmd = 'PUBLISH'
if ARGV[3] == '1' then cmd = 'SPUBLISH' end
local n = redis.pcall(cmd, ARGV[2], '')
if type(n) ~= 'number' then n = 0 end
return deleted + 2 * n
