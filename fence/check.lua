-- The fence check, the head of every script of the package (fence.go puts
-- it before each body). KEYS[1] is the resource's hash: its field value
-- holds the data, fence the highest token of an exclusive holder (a write,
-- a recorded read), shared the highest token of a shared reader; refused
-- and writes count the refusals and the accepted writes.
-- ARGV[1] is the token, in decimal; ARGV[2] the call's id, a random string
-- of the caller (redis.go) that every error reply of the package carries
-- after its code, so that the caller tells them from the errors of a
-- script of its own (Redis.Eval), whatever those say; ARGV[3] the name of
-- the lock that issued the token (its sequencer's), '' for a bare token.
-- The field lock holds the lock the resource follows: the first name
-- admitted with a token, after which a token of another lock, or a bare
-- one, is refused.
--
-- Tokens are compared as decimal strings, not as Lua numbers: a Lua number
-- is a double, exact only below 2^53 in magnitude, and a degraded-mode
-- token (-2^63 plus a lease version) is not, so two of them a version
-- apart would compare equal.
local function cmp(a, b)
  if a == b then return 0 end
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    if na then return -1 end
    return 1
  end
  local r
  if #a ~= #b then
    if #a < #b then r = -1 else r = 1 end
  elseif a < b then
    r = -1
  else
    r = 1
  end
  if na then r = -r end
  return r
end

local key, token, call, lock = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local f = redis.call('HMGET', key, 'fence', 'shared', 'lock')

-- check returns an error reply when the resource follows another lock, or
-- token is below the fence (or, with shared true, below the highest shared
-- reader's token too), nil otherwise. The name the resource follows comes
-- back in hex: a lock's name may hold any byte, an error reply may not.
local function check(shared)
  if f[3] and f[3] ~= lock then
    redis.call('HINCRBY', key, 'refused', 1)
    local name = string.gsub(f[3], '.', function(c) return string.format('%02x', string.byte(c)) end)
    return redis.error_reply('FENCE_LOCK ' .. call .. ' ' .. name)
  end
  local seen = f[1]
  if shared and f[2] and (not seen or cmp(f[2], seen) > 0) then
    seen = f[2]
  end
  if seen and cmp(token, seen) < 0 then
    redis.call('HINCRBY', key, 'refused', 1)
    return redis.error_reply('FENCE_STALE ' .. call .. ' ' .. token .. ' ' .. seen)
  end
  return nil
end

-- bind records the lock the resource follows, on its first sequencer.
local function bind()
  if lock ~= '' and not f[3] then
    redis.call('HSET', key, 'lock', lock)
  end
end

-- raise records token as the fence, which check found at or below it.
local function raise()
  if f[1] ~= token then
    redis.call('HSET', key, 'fence', token)
  end
  bind()
end
