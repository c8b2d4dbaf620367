-- permitrelease: give back one permit of a semaphore (permit.lua), retire
-- its fencing token, and tell the waiters when a permit is free.
-- KEYS[1] semaphore key
-- KEYS[2] the semaphore's fencing counter (counter.lua)
-- ARGV[1] permit
-- ARGV[2] release channel; '' publishes nothing (clean-up)
-- ARGV[3] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- ARGV[4] the permit's fencing token; '0' retires none (release.lua)
-- ARGV[5] expiry of the fencing counter, milliseconds, when this writes it
-- Returns deleted + 2 x receivers (notify.lua): deleted is 1 when the
-- permit was ours and is gone now. When a permit is free afterwards and the
-- semaphore was waited for (a refused permit.lua left the mark), the
-- release publishes and takes the mark.
-- Unless the name is a lock of the family, the release retires the
-- permit's token as release.lua does (after the delete, in pcall): a
-- refresh of the permit delayed past the release then does not take it
-- back (permitrefresh.lua).
local lock, hold = KEYS[1], 'h:' .. ARGV[1]
local now = node_now()
local cur = live(lock, now)
local deleted, full = 0, false
if cur ~= nil then
  if cur.mode ~= 's' then
    return 0
  end
  deleted = redis.call('HDEL', lock, hold)
  if deleted == 1 and cur.holds == 1 then
    redis.call('DEL', lock)
  end
  full = deleted == 0 and cur.holds >= tonumber(cur.k)
end
local token = tonumber(ARGV[4])
if token > 0 then
  pcall(retire, KEYS[2], token, ARGV[5])
end
if full then
  return 0 -- still full: nothing to tell
end
if ARGV[2] == '' then
  return deleted
end
return notify(deleted, redis.call('DEL', lock .. ':waiters'), ARGV[2], ARGV[3])
