// Package keys forms every Redis key and channel of a lock, for the library
// and the command line tool alike. For a lock NAME under prefix PREFIX
// (redlock.WithPrefix):
//
//	{PREFIX+NAME}           the lock: the owner's value, with the lock's TTL
//	{PREFIX+NAME}:fence     the fencing counter
//	{PREFIX+NAME}:released  the release channel (pub/sub)
//	{PREFIX}:epoch          the restart guard's epoch record, one per node
//	{PREFIX+NAME}:epoch     the epoch record on a Redis Cluster, one per lock
//
// The braces are a Cluster hash tag: every key of a lock lands in one slot,
// so that one script may touch them all. On a Cluster a script may only
// touch its lock's slot, hence an epoch record per lock there.
package keys

import (
	"errors"
	"fmt"
	"strings"
)

// Layout is the key layout of the locks under one prefix.
type Layout struct {
	Prefix string
}

// ErrEmptyName is returned by Lock for an empty lock name.
var ErrEmptyName = errors.New("empty lock name")

// Lock is the Redis key of lock name: the prefix and the name inside one
// hash tag. It refuses an empty name, and a prefix and name that start
// with '}', which would leave the Cluster hash tag empty.
func (l Layout) Lock(name string) (string, error) {
	if name == "" {
		return "", ErrEmptyName
	}
	tag := l.Prefix + name
	if strings.HasPrefix(tag, "}") {
		return "", fmt.Errorf("lock name %q with prefix %q starts with '}', which leaves its Cluster hash tag empty", name, l.Prefix)
	}
	return "{" + tag + "}", nil
}

// NodeEpoch is the epoch record of a standalone or Sentinel-managed node,
// shared by every lock of the prefix on the node.
func (l Layout) NodeEpoch() string { return "{" + l.Prefix + "}:epoch" }

// Epoch is the epoch record that guards the lock of key lockKey (from
// Lock): the node's, or on a Redis Cluster the lock's own.
func (l Layout) Epoch(lockKey string, cluster bool) string {
	if cluster {
		return ClusterEpoch(lockKey)
	}
	return l.NodeEpoch()
}

// Fence is the fencing counter of the lock of key lockKey (from Lock).
func Fence(lockKey string) string { return lockKey + ":fence" }

// Channel is the release channel of the lock of key lockKey (from Lock):
// it shares the key's hash tag, so a sharded subscription reaches its slot.
func Channel(lockKey string) string { return lockKey + ":released" }

// ClusterEpoch is the epoch record of the lock of key lockKey (from Lock)
// on a Redis Cluster.
func ClusterEpoch(lockKey string) string { return lockKey + ":epoch" }
