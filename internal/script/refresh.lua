-- refresh: compare-and-pexpire, re-seeding a node that lost the key.
-- KEYS[1] lock key
-- ARGV[1] owner value
-- ARGV[2] new ttl in milliseconds
-- Returns 1 when the key held our value and its expiry was set, 2 when the
-- key was missing and was set again with our value (re-seed), 0 when another
-- owner holds it.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
