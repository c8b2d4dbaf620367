-- counter: a lock's fencing counter, a string holding the last token this
-- node issued for the lock (set with the counter's expiry on every write).
-- An older layout kept it in a hash (field v); reading one still works, and
-- the next write replaces it with a string.
local function counter(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    v = redis.call('HGET', key, 'v')
  end
  return tonumber(v)
end
