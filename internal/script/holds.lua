-- holds: the lock family's hash (family.lua), read with its expired holds
-- pruned.

-- live returns the lock's fields {mode, o, t, holds} (holds: the number
-- of live holds), after deleting the holds whose expiry is at or before
-- now, and the key when none is left; nil when the lock is free. A plain
-- lock (a string) is an error naming the kind, another type Redis's
-- WRONGTYPE. The caller checks the mode against those it accepts (a
-- whitelist): kind_error names the kind that holds the lock.
local function live(key, now)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then
    return nil
  end
  if t == 'string' then
    error({err = 'REDLOCK_KIND ' .. key .. ' is held by a plain lock (Client.Mutex, All or Any, or the Client\'s Obtain, TryObtain or Do)'})
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

-- kind_error raises REDLOCK_KIND for a live hash of a mode the caller does
-- not accept (not_what: what the caller would take), naming the handle of
-- the kind that holds key.
local function kind_error(key, mode, not_what)
  local held = 'a lock of a kind this version does not know (mode ' .. tostring(mode) .. ')'
  if mode == 'w' or mode == 'r' then
    held = 'a read-write or reentrant lock (Client.RWMutex or Client.Reentrant)'
  elseif mode == 's' then
    held = 'a semaphore (Client.Semaphore)'
  end
  error({err = 'REDLOCK_KIND ' .. key .. ' is held by ' .. held .. ', not ' .. not_what})
end
