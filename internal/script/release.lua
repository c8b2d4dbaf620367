-- release: compare-and-delete, then tell the waiters.
-- KEYS[1] lock key
-- ARGV[1] owner value
-- ARGV[2] release channel (shares KEYS[1]'s hash tag); '' publishes nothing
-- ARGV[3] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- Returns {deleted, receivers}: deleted is 1 when the key held our value and
-- was deleted, 0 otherwise; receivers is how many subscribed connections
-- heard the notification.
--
-- The notification goes out when the key is free now: deleted here, or
-- already gone (expired). It is a hint to waiters, so a failure to publish
-- (an ACL without pub/sub) must not fail the release: pcall.
local v = redis.call('GET', KEYS[1])
local deleted = 0
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  deleted = 1
elseif v ~= false then
  return {0, 0}
end
if ARGV[2] == '' then
  return {deleted, 0}
end
local cmd = 'PUBLISH'
if ARGV[3] == '1' then cmd = 'SPUBLISH' end
local n = redis.pcall(cmd, ARGV[2], '')
if type(n) ~= 'number' then n = 0 end
return {deleted, n}
