package redlock

import (
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// A lock's Redis keys on each node, and each node's epoch guard
// (docs/fencing.md); the layout itself is internal/keys'.

// keyLayout is the part of the engine that knows where a lock's keys are
// on its nodes.
type keyLayout struct {
	prefix string // WithKeyPrefix
	// epochKey is the epoch record of a standalone node; cluster is set
	// when some node is a Redis Cluster (see lockKeys.on). plainNode is the
	// first node that is not (-1 if none): every such node shares one
	// prepared script call per lock.
	epochKey  string
	cluster   bool
	plainNode int
}

// lockKeys are the Redis keys of one lock: its key, and on a Redis Cluster
// its epoch record. Its fencing counter's key, which only the acquire and
// the fencing rounds use, is formed when they need it (fence), rather than
// kept by every held lock.
type lockKeys struct {
	key, clusterEpoch string
}

// keysOf forms the keys of the lock of key.
func (kl *keyLayout) keysOf(key string) lockKeys {
	k := lockKeys{key: key}
	if kl.cluster {
		k.clusterEpoch = keys.ClusterEpoch(key)
	}
	return k
}

// fence is the key of the lock's fencing counter.
func (k lockKeys) fence() string { return keys.Fence(k.key) }

// on are the lock's keys on node i, but its fencing counter (Fence is
// empty: a refresh does not use it). The epoch record is one per node,
// except on a Redis Cluster, where a script may only touch the slot of its
// lock: there each lock's hash tag has a record of its own.
func (k lockKeys) on(e *engine, i int) script.Keys {
	sk := script.Keys{Lock: k.key, Epoch: e.layout.epochKey}
	if e.nodes[i].Cluster {
		sk.Epoch = k.clusterEpoch
	}
	return sk
}

// fenced are the lock's keys on node i with its fencing counter fence
// (from fence, formed once per round).
func (k lockKeys) fenced(e *engine, i int, fence string) script.Keys {
	sk := k.on(e, i)
	sk.Fence = fence
	return sk
}

// redisKey is the Redis key of a lock name: the prefix and the name inside
// one hash tag, so that every key of a lock lands in one Cluster slot
// (internal/keys).
func (kl *keyLayout) redisKey(name string) (string, error) {
	key, err := keys.Layout{Prefix: kl.prefix}.Lock(name)
	if err != nil {
		return "", invalid("%v", err)
	}
	return key, nil
}
