-- id: the node's identity (docs/reconfiguration.md, "A node's identity"):
-- a random value that the first Client to ask writes into the node's data
-- set, and that every Client reads from then on. It names the node in the
-- configuration records however its address is written, and tells two
-- nodes apart that are one: a replica given beside its master, or a copy
-- of a node's data set, holds the same one. Kept by persistence across a
-- restart and by replication across a failover; a node that lost its data
-- gets a new one, as it is then a new node (the restart guard keeps it out
-- of locking until every lock it may have forgotten has expired).
-- KEYS[1] the identity key ({PREFIX}:id)
-- ARGV[1] a new random identity, written when the node has none
-- Returns {identity, run_id}: run_id is the Redis process's (runid.lua),
-- '' when INFO is refused (an ACL).
local id = redis.call('GET', KEYS[1])
if not id then
  redis.call('SET', KEYS[1], ARGV[1])
  id = ARGV[1]
end
return {id, run_id()}
