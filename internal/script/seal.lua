-- seal: the second round of an acquire of the lock family (family.lua)
-- whose yes-votes did not already agree on the token. Raises the lock's
-- fencing counter to at least the token, as fence.lua (token.lua's raise:
-- a missing counter is seeded from the node's time first), and records the
-- token as the exclusive owner's where the owner holds the lock, so that
-- its re-entries find it (docs/lock-family.md). The recorded token never
-- decreases either: a delayed seal of an older acquire of the owner leaves
-- a newer one's in place.
-- As fence.lua, only on the node the Client identified (epoch.lua's
-- node_is).
-- KEYS[1] fencing counter of the lock
-- KEYS[2] lock key
-- KEYS[3] the node's epoch record (beside its identity)
-- ARGV[1] token
-- ARGV[2] expiry of the fencing counter, milliseconds
-- ARGV[3] owner ('' for a reader: nothing to record)
-- ARGV[4] guard, with the node's identity (see epoch.lua)
-- Returns 1.
node_is(KEYS[3], ARGV[4])
local token = tonumber(ARGV[1])
raise(KEYS[1], token, ARGV[2])
if ARGV[3] ~= '' and redis.call('TYPE', KEYS[2])['ok'] == 'hash' then
  local cur = redis.call('HMGET', KEYS[2], 'mode', 'o')
  local t = tonumber(redis.call('HGET', KEYS[2], 't')) or 0
  -- Only a token an acquire recorded is raised: a hash without one was
  -- re-seeded by a refresh, maybe late, after another owner's tenure, and
  -- this seal may be of an acquire older than that tenure (the model
  -- checker's stale-seal counterexample, internal/model).
  if cur[1] == 'w' and cur[2] == ARGV[3] and t > 0 and t < token then
    redis.call('HSET', KEYS[2], 't', ARGV[1])
  end
end
return 1
