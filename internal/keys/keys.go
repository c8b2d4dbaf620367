// Package keys forms every Redis key and channel of a lock, for the library
// and the command line tool alike. For a lock NAME under prefix PREFIX
// (redlock.WithPrefix):
//
//	{PREFIX+NAME}           the lock: the owner's value, with the lock's TTL;
//	                        for the lock family and a semaphore, a hash
//	                        (mode, k, o, t, one expiring field h:ID per hold
//	                        or permit: FieldMode and the others below;
//	                        family.lua, permit.lua)
//	{PREFIX+NAME}:fence     the fencing counter
//	{PREFIX+NAME}:released  the release channel (pub/sub)
//	{PREFIX+NAME}:waiters   the mark that someone waits: a release publishes
//	{PREFIX+NAME}:wwait     the lock family's mark that a writer waits
//	{PREFIX}:epoch          the restart guard's epoch record, one per node
//	{PREFIX+NAME}:epoch     the epoch record on a Redis Cluster, one per lock
//	EPOCH:ok                the guard's fast path beside each epoch record
//	{PREFIX}:id             the node's identity (id.lua): a random value
//	                        in its data set, which names it whatever its
//	                        address (docs/reconfiguration.md)
//	{PREFIX}:configs        the configuration records of the Clients that
//	                        lock on the node, one hash per node (record.lua,
//	                        docs/reconfiguration.md); its fields:
//	  c:FP                  a Client on node set FP alone
//	  j:FPA:FPB             a Client in joint configuration, from FPA to FPB
//	  s:FP                  a joint Client saw a Client on FP alone (relayed)
//	  m:FP                  the move floor of a move to FP
//
// The scripts derive the last two, the release channel of a plain lock and
// the lock family's :wwait from the keys they are given (acquire.lua,
// release.lua, epoch.lua, family.lua, permit.lua, permitrelease.lua): the
// suffixes here and there must agree.
//
// PREFIX+NAME is a plain concatenation, with no separator: prefixes "a" and
// "ab" give the same key for the names "bc" and "c". Two prefixes share keys
// exactly when one begins with the other; WithPrefix's documentation and
// docs/safety.md (section 3) tell users to avoid that, and why the layout
// stays as it is (Clients of different versions must lock the same keys).
//
// The braces are a Cluster hash tag: every key of a lock lands in one slot,
// so that one script may touch them all. On a Cluster a script may only
// touch its lock's slot, hence an epoch record per lock there.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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

// Name is the lock name whose key (from Lock) is lockKey: Lock's
// inverse, a slice of lockKey, not a copy.
func (l Layout) Name(lockKey string) string {
	return lockKey[1+len(l.Prefix) : len(lockKey)-1]
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

// NodeID is the key of the node's identity (id.lua), in the slot of the
// configuration records (Configs).
func (l Layout) NodeID() string { return "{" + l.Prefix + "}:id" }

// Configs is the hash of the configuration records of the Clients that
// lock under the prefix on a node (docs/reconfiguration.md).
func (l Layout) Configs() string { return "{" + l.Prefix + "}:configs" }

// The prefixes of the fields of the configuration records (Configs).
const (
	ConfigSinglePrefix = "c:" // c:FP, a Client on node set FP alone
	ConfigJointPrefix  = "j:" // j:FPA:FPB, a Client moving from FPA to FPB
	ConfigSeenPrefix   = "s:" // s:FP, a joint Client saw a Client on FP alone
	ConfigFloorPrefix  = "m:" // m:FP, the move floor of a move to FP
)

// The fields of the configuration records (Configs): fp, a and b are node
// set fingerprints.
func ConfigSingle(fp string) string  { return ConfigSinglePrefix + fp }
func ConfigJoint(a, b string) string { return ConfigJointPrefix + a + ":" + b }
func ConfigSeen(fp string) string    { return ConfigSeenPrefix + fp }
func ConfigFloor(fp string) string   { return ConfigFloorPrefix + fp }

// ParseConfigJoint returns the fingerprints a and b of a joint Client's
// field j:A:B (ConfigJoint); ok is false for any other field.
func ParseConfigJoint(f string) (a, b string, ok bool) {
	rest, ok := strings.CutPrefix(f, ConfigJointPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}

// ParseConfigAlone returns the fingerprint of a field that records a
// Client on one node set alone: its own (c:FP, ConfigSingle) or as a joint
// Client saw it (s:FP, ConfigSeen); seen tells which. ok is false for any
// other field.
func ParseConfigAlone(f string) (fp string, seen, ok bool) {
	if fp, ok := strings.CutPrefix(f, ConfigSinglePrefix); ok {
		return fp, false, true
	}
	if fp, ok := strings.CutPrefix(f, ConfigSeenPrefix); ok {
		return fp, true, true
	}
	return "", false, false
}

// The fields of a lock's hash, for the lock family and the semaphore
// (docs/lock-family.md; family.lua, permit.lua and holds.lua write them,
// with the same names as literals: TestLuaFields checks that they agree).
const (
	FieldMode    = "mode" // the hash's mode: ModeWrite, ModeRead or ModePermit
	FieldPermits = "k"    // a semaphore's number of permits (ModePermit)
	FieldOwner   = "o"    // the exclusive owner (ModeWrite)
	FieldToken   = "t"    // the fencing token recorded for the owner (ModeWrite)
	HoldPrefix   = "h:"   // h:ID, one field per hold or permit, its value the hold's expiry (node ms)
)

// The values of FieldMode, and the modes of a script.Hold.
const (
	ModeWrite  = 'w' // an exclusive hold: a writer or a reentrant lock's owner
	ModeRead   = 'r' // a shared hold: a reader
	ModePermit = 's' // a semaphore's permit
)

// Hold is the field of the hold (or permit) of random ID id in a lock's
// hash.
func Hold(id string) string { return HoldPrefix + id }

// Fingerprint names a set of nodes in the configuration records: the
// first 16 hex digits of the SHA-256 of its members, sorted. A member is
// a node's Member: its identity where it is known, so that one set has one
// fingerprint however its nodes' addresses are written. Releases before
// issue 44 gave the addresses themselves as members (the set's fingerprint
// by spelling): redlock doctor computes that one too, to name the records
// of such Clients.
func Fingerprint(members []string) string {
	members = slices.Sorted(slices.Values(members))
	h := sha256.Sum256([]byte(strings.Join(members, "\n")))
	return hex.EncodeToString(h[:8])
}

// Member is a node's member of a Fingerprint: "id:" and its identity
// (NodeID's value), or "addr:" and its address while its identity is not
// known (the node has not answered yet).
func Member(id, addr string) string {
	if id != "" {
		return "id:" + id
	}
	return "addr:" + addr
}

// Fence is the fencing counter of the lock of key lockKey (from Lock).
func Fence(lockKey string) string { return lockKey + ":fence" }

// Channel is the release channel of the lock of key lockKey (from Lock):
// it shares the key's hash tag, so a sharded subscription reaches its slot.
func Channel(lockKey string) string { return lockKey + ":released" }

// ClusterEpoch is the epoch record of the lock of key lockKey (from Lock)
// on a Redis Cluster.
func ClusterEpoch(lockKey string) string { return lockKey + ":epoch" }

// Waiters is the mark that a lock of key lockKey (from Lock) is waited for:
// a refused acquire or a waiting head sets it, and a release publishes on
// Channel only when it finds it.
func Waiters(lockKey string) string { return lockKey + ":waiters" }

// Trusted is the guard's fast-path key beside the epoch record epochKey:
// it exists while the node's identity check is trusted and the node is out
// of recovery (epoch.lua writes it on the node's own process only).
func Trusted(epochKey string) string { return epochKey + ":ok" }

// WriterWaits is the lock family's mark, beside the hash at lockKey (from
// Lock), that a writer was refused and waits: later readers wait behind it
// (docs/lock-family.md). family.lua forms it from the lock key.
func WriterWaits(lockKey string) string { return lockKey + ":wwait" }
