-- counter: a lock's fencing counter, a string holding the last token this
-- node issued for the lock (set with the counter's expiry on every write).
-- cur is the key's value as a GET or MGET read it (false when missing, or
-- not a string). An older layout kept the counter in a hash (field v);
-- reading one still works, and the next write replaces it with a string.
local function counter(key, cur)
  if cur == nil then
    cur = redis.pcall('GET', key)
  end
  if cur == false or type(cur) == 'table' then
    cur = redis.pcall('HGET', key, 'v')
    if type(cur) == 'table' then
      cur = false
    end
  end
  return tonumber(cur)
end
