-- fence: the second round of an acquire whose yes-votes disagreed on the
-- token. Raises the lock's fencing counter to at least the token (token.lua's
-- raise: a missing counter is seeded from the node's time first), so that a
-- quorum of nodes holds a counter no lower than it.
-- The raises of a quorum make the token the acquire's, as votes do: only
-- on the node the Client identified (epoch.lua's node_is).
-- KEYS[1] fencing counter of the lock
-- KEYS[2] the node's epoch record (beside its identity)
-- ARGV[1] token
-- ARGV[2] expiry of the fencing counter, milliseconds
-- ARGV[3] guard, with the node's identity (see epoch.lua)
-- Returns 1.
node_is(KEYS[2], ARGV[3])
raise(KEYS[1], tonumber(ARGV[1]), ARGV[2])
return 1
