-- A shared read, by the holder of a read (shared) lock: readers of one
-- read-write lock may overlap and are not ordered among themselves, so a
-- reader is refused only by a newer exclusive holder (a fenced read or a
-- write with a higher token), never by another reader. It records the
-- highest reader token, so that a writer older than a reader (one that lost
-- its lock) can no longer write.
-- KEYS[1] the value, KEYS[2] the highest token of an exclusive holder,
-- KEYS[3] counts, KEYS[4] the highest token of a shared read
-- ARGV[1] the reader's token
-- Returns the value (false when none yet).
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < seen then
  redis.call('HINCRBY', KEYS[3], 'rejected', 1)
  return redis.error_reply('STALE token ' .. ARGV[1] .. ' is below ' .. string.format('%d', seen))
end
if token > tonumber(redis.call('GET', KEYS[4]) or '0') then
  redis.call('SET', KEYS[4], ARGV[1])
end
return redis.call('GET', KEYS[1])
