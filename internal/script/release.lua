-- release: compare-and-delete, retire the lock's fencing token, then tell
-- the waiters.
-- KEYS[1] lock key
-- KEYS[2] the lock's fencing counter (counter.lua)
-- ARGV[1] owner value
-- ARGV[2] '' publishes nothing, '0' publishes with PUBLISH, '1' with
--         SPUBLISH (Redis Cluster), on the release channel KEYS[1]:released
--         (keys.Channel: it shares KEYS[1]'s hash tag)
-- ARGV[3] the lock's fencing token; '0' retires none (the clean-up of an
--         attempt that was never granted, which nothing refreshes)
-- ARGV[4] expiry of the fencing counter, milliseconds, when this writes it
-- Returns deleted + 2 x receivers (notify.lua): deleted is 1 when the key
-- held our value and was deleted, 0 otherwise; receivers is how many
-- subscribed connections heard the notification.
--
-- Where the key is ours or gone, the release retires the lock's token: the
-- counter goes above it (retire.lua), so that a refresh of the lock that
-- arrives after the release, delayed in the network, finds it retired and
-- does not re-seed it (refresh.lua). It does so after the delete, and in
-- pcall: under maxmemory the counter's INCR or SET is refused (the script
-- has no flags, and both may raise memory use), and a release must still
-- free the node; the token is then not retired there.
--
-- An acquire refused by a holder marks the lock as waited for (the key
-- KEYS[1]:waiters, see acquire.lua). The notification goes out when the key
-- is free now (deleted here, or already expired) and the mark was there,
-- and takes the mark with it (notify.lua): an uncontended release costs a
-- GET and a DEL. A release without a publishing (the clean-up of a failed
-- attempt) leaves the mark: the lock may well be held on other nodes, and
-- the waiters wait for its holder.
local v = redis.call('GET', KEYS[1])
local mark = KEYS[1] .. ':waiters'
if v ~= false and v ~= ARGV[1] then
  return 0
end
local deleted, waited = 0, 0
if ARGV[2] == '' then
  if v ~= false then
    deleted = redis.call('DEL', KEYS[1])
  end
elseif v == false then
  waited = redis.call('DEL', mark)
else
  deleted, waited = 1, redis.call('DEL', KEYS[1], mark) - 1
end
local token = tonumber(ARGV[3])
if token > 0 then
  pcall(retire, KEYS[2], token, ARGV[4])
end
return notify(deleted, waited, KEYS[1] .. ':released', ARGV[2])
