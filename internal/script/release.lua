-- release: compare-and-delete.
-- KEYS[1] lock key
-- ARGV[1] owner value
-- Returns 1 when the key held our value and was deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
