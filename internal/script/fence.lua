-- fence: the second round of an acquire whose yes-votes disagreed on the
-- token. Raises the lock's fencing counter to at least the token (token.lua's
-- raise: a missing counter is seeded from the node's time first), so that a
-- quorum of nodes holds a counter no lower than it.
-- KEYS[1] fencing counter of the lock
-- ARGV[1] token
-- ARGV[2] expiry of the fencing counter, milliseconds
-- Returns 1.
raise(KEYS[1], tonumber(ARGV[1]), ARGV[2])
return 1
