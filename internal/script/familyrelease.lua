-- familyrelease: give back one hold of a lock of the family (family.lua),
-- retire its fencing token, and tell the waiters when the lock is free.
-- KEYS[1] lock key
-- KEYS[2] the lock's fencing counter (counter.lua)
-- ARGV[1] mode: 'w' or 'r'
-- ARGV[2] owner ('w'; '' for 'r')
-- ARGV[3] hold
-- ARGV[4] release channel; '' publishes nothing (clean-up)
-- ARGV[5] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- ARGV[6] the hold's fencing token; '0' retires none (release.lua)
-- ARGV[7] expiry of the fencing counter, milliseconds, when this writes it
-- Returns deleted + 2 x receivers (notify.lua): deleted is 1 when the
-- hold was ours and is gone now. The lock is free when its last live hold
-- is gone; then, if it was waited for, the release publishes.
-- Unless the lock is held in another mode or by another owner, the
-- release retires the hold's token as release.lua does (after the
-- delete, in pcall): a refresh of the hold delayed past the release then
-- does not take it back (familyrefresh.lua), beside other holds or in a
-- new hash.
local lock, mode, owner, hold = KEYS[1], ARGV[1], ARGV[2], 'h:' .. ARGV[3]
local now = node_now()
local cur = live(lock, now)
local deleted, free = 0, true
if cur ~= nil then
  if cur.mode ~= mode or (mode == 'w' and cur.o ~= owner) then
    return 0
  end
  deleted = redis.call('HDEL', lock, hold)
  if deleted == 1 and cur.holds == 1 then
    redis.call('DEL', lock)
  else
    free = false
  end
end
local token = tonumber(ARGV[6])
if token > 0 then
  pcall(retire, KEYS[2], token, ARGV[7])
end
if not free or ARGV[4] == '' then
  return deleted
end
return notify(deleted, redis.call('DEL', lock .. ':waiters'), ARGV[4], ARGV[5])
