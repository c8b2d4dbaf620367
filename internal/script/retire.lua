-- retire: a release's step on the lock's fencing counter (release.lua,
-- familyrelease.lua, permitrelease.lua). Needs nothing else.

-- retire puts the counter above token, the token of the lock being
-- released, so that a refresh of the lock that arrives after the release,
-- delayed in the network, finds its token retired and does not re-seed it
-- (refresh.lua, familyrefresh.lua, permitrefresh.lua). It increments the
-- counter (INCR keeps its expiry): one write, and no read, in the common
-- case, where the counter is at the token (the release of the lock whose
-- acquire left it there) or above. Where that leaves it at or below the
-- token (a node whose vote was not the token), it is set to token + 1;
-- where the counter was missing (INCR made it 1), to the larger of that
-- and the node's time in whole seconds x 1000 x 1024 (token.lua's seed),
-- as token.lua's raise would (a release
-- delayed past the counter's expiry must not write an old token into
-- it); both with the counter's expiry ttl (ms). The counter never goes
-- down (docs/fencing.md, Lemma 1). A counter in the layout before
-- counter.lua (a hash: INCR fails) is replaced as if below the token. The
-- release scripts run without epoch.lua and token.lua, whose helpers
-- every release would pay for making.
local function retire(key, token, ttl)
  local v = redis.pcall('INCR', key)
  if type(v) == 'number' and v > token and v ~= 1 then
    return
  end
  local to = token + 1
  if v == 1 then
    to = math.max(tonumber(redis.call('TIME')[1]) * 1000 * 1024, to)
  end
  redis.call('SET', key, string.format('%d', to), 'PX', ttl)
end
