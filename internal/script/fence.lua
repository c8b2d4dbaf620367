-- fence: the second round of an acquire whose yes-votes disagreed on the
-- token. Raises the lock's fencing counter to at least the token, so that a
-- quorum of nodes holds a counter no lower than it.
-- KEYS[1] fencing counter of the lock
-- ARGV[1] token
-- ARGV[2] expiry of the fencing counter, milliseconds
-- Returns 1.
local token = tonumber(ARGV[1])
local v = counter(KEYS[1])
if v == nil or v < token then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
