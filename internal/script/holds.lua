-- holds: the lock family's hash (family.lua), read with its expired holds
-- pruned.

-- live returns the lock's fields {mode, o, t, holds} (holds: the number
-- of live holds), after deleting the holds whose expiry is at or before
-- now, and the key when none is left; nil when the lock is free. A plain
-- lock (a string) is an error naming the kind, another type Redis's
-- WRONGTYPE.
local function live(key, now)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then
    return nil
  end
  if t == 'string' then
    error({err = 'REDLOCK_KIND ' .. key .. ' is held by a plain lock (Obtain without WithOwner, WithShared or WithExclusive)'})
  end
  if t ~= 'hash' then
    error({err = 'WRONGTYPE lock key ' .. key .. ' holds a ' .. t .. ', not a lock'})
  end
  local all = redis.call('HGETALL', key)
  local cur, gone, holds = {}, {}, 0
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.sub(f, 1, 2) == 'h:' then
      if tonumber(v) > now then
        holds = holds + 1
      else
        gone[#gone + 1] = f
      end
    else
      cur[f] = v
    end
  end
  if holds == 0 then
    redis.call('DEL', key)
    return nil
  end
  if #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
  end
  cur.holds = holds
  return cur
end
