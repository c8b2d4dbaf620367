-- retire: a release's step on the lock's fencing counter (release.lua,
-- familyrelease.lua, permitrelease.lua). Needs counter.lua.

-- retire puts the counter above token, the token of the lock being
-- released, so that a refresh of the lock that arrives after the release,
-- delayed in the network, finds its token retired and does not re-seed it
-- (refresh.lua, familyrefresh.lua, permitrefresh.lua). A counter at the
-- token, the common case (the release of the lock whose acquire left it
-- there), is incremented, which keeps its expiry; one below it is set to
-- token + 1, and a missing one to the larger of that and the node's time
-- x 1024, as token.lua's raise would (a release delayed past the
-- counter's expiry must not write an old token into it), both with the
-- counter's expiry ttl (ms); one above it is kept. The counter never goes
-- down (docs/fencing.md, Lemma 1). The release scripts run without
-- epoch.lua and token.lua's helpers, which would cost every release the
-- making of their functions.
local function retire(key, token, ttl)
  local v = counter(key)
  if v ~= nil and v > token then
    return
  end
  if v == token and type(redis.pcall('INCR', key)) == 'number' then
    return
  end
  local to = token + 1
  if v == nil then
    local t = redis.call('TIME')
    to = math.max((tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024, to)
  end
  redis.call('SET', key, string.format('%d', to), 'PX', ttl)
end
