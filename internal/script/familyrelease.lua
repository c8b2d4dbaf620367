-- familyrelease: give back one hold of a lock of the family (family.lua),
-- and tell the waiters when the lock is free.
-- KEYS[1] lock key
-- ARGV[1] mode: 'w' or 'r'
-- ARGV[2] owner ('w'; '' for 'r')
-- ARGV[3] hold
-- ARGV[4] release channel; '' publishes nothing (clean-up)
-- ARGV[5] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- Returns deleted + 2 x receivers, as release.lua: deleted is 1 when the
-- hold was ours and is gone now. The lock is free when its last live hold
-- is gone; then, if it was waited for, the release publishes.
local lock, mode, owner, hold = KEYS[1], ARGV[1], ARGV[2], 'h:' .. ARGV[3]
local now = node_now()
local cur = live(lock, now)
local deleted = 0
if cur ~= nil then
  if cur.mode ~= mode or (mode == 'w' and cur.o ~= owner) then
    return 0
  end
  deleted = redis.call('HDEL', lock, hold)
  if deleted == 0 or cur.holds > 1 then
    return deleted
  end
  redis.call('DEL', lock)
end
if ARGV[4] == '' then
  return deleted
end
if redis.call('DEL', lock .. ':waiters') == 0 then
  return deleted
end
local cmd = 'PUBLISH'
if ARGV[5] == '1' then cmd = 'SPUBLISH' end
local n = redis.pcall(cmd, ARGV[4], '')
if type(n) ~= 'number' then n = 0 end
return deleted + 2 * n
