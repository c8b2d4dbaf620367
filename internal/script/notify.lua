-- notify: a release's last step, the notification to the lock's waiters
-- (release.lua, familyrelease.lua, permitrelease.lua). Needs nothing else.

-- notify returns the release's reply, deleted + 2 x receivers: one integer,
-- since an array reply costs the client allocations on every release.
-- deleted is the release's own answer (1 when it freed what was ours);
-- waited is what the release's DEL of the waiters' mark (KEYS[1]:waiters,
-- see acquire.lua) returned: where no mark was taken nobody waits, and
-- nothing is published. Else it publishes on channel, with SPUBLISH (Redis
-- Cluster's sharded pub/sub) where shard is '1', else PUBLISH; receivers is
-- how many subscribed connections heard it. The notification is a hint to
-- waiters, so a failure to publish (an ACL without pub/sub) must not fail
-- the release: pcall, and no receivers.
local function notify(deleted, waited, channel, shard)
  if waited == 0 then
    return deleted
  end
  local cmd = 'PUBLISH'
  if shard == '1' then cmd = 'SPUBLISH' end
  local n = redis.pcall(cmd, channel, '')
  if type(n) ~= 'number' then n = 0 end
  return deleted + 2 * n
end
