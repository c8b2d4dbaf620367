-- A fenced read: the reader announces its token, so that a holder that lost
-- its lock (a lower token) cannot write after a newer holder has read.
-- KEYS[1] the value, KEYS[2] the highest token seen, KEYS[3] counts,
-- KEYS[4] the highest token of a shared read (shared.lua)
-- ARGV[1] the reader's token
-- Returns the value (false when none yet).
local seen = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('GET', KEYS[4]) or '0'))
local token = tonumber(ARGV[1])
if token < seen then
  redis.call('HINCRBY', KEYS[3], 'rejected', 1)
  return redis.error_reply('STALE token ' .. ARGV[1] .. ' is below ' .. string.format('%d', seen))
end
redis.call('SET', KEYS[2], ARGV[1])
return redis.call('GET', KEYS[1])
