package redlock

// A Client's node sets: the nodes it locks on, and in a joint configuration
// (WithNextNodes, joint.go) the next set beside the current one, with
// their fingerprints.

import (
	"reflect"
	"slices"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

// nodeSets are the node sets of a Client: the current set, and in joint
// configuration the next, as masks of the engine's nodes, with their
// fingerprints (configuration records).
type nodeSets struct {
	cur, next     uint64 // next is 0 unless joint
	curFP, nextFP string
	known         bool // every node identified: the FPs are final
	// curAlias and nextAlias are the fingerprints by address, as releases
	// before issue 44 named the sets (joint.Sets.CurAlias).
	curAlias, nextAlias string
}

func (s *nodeSets) joint() bool { return s.next != 0 }

// joinNodes returns the nodes of a Client (the current set, followed by
// the nodes of next not in it) and its node sets.
func joinNodes(cur, next []driver.Node, nextSet bool) ([]driver.Node, nodeSets, error) {
	all := slices.Clone(cur)
	sets := nodeSets{cur: quorum.Mask(len(cur), func(int) bool { return true })}
	if nextSet {
		if len(next) == 0 {
			return nil, sets, invalid("WithNextNodes with no nodes")
		}
		for i, n := range next {
			if n == nil || isNilValue(n) {
				return nil, sets, invalid("next node %d is nil", i)
			}
			j := slices.IndexFunc(all, func(m driver.Node) bool { return oneNode(m, n) })
			if j < 0 {
				j = len(all)
				all = append(all, n)
			}
			if j >= limits.MaxNodes {
				return nil, sets, invalid("the current and next nodes are more than %d together", limits.MaxNodes)
			}
			if sets.next&(1<<j) != 0 {
				return nil, sets, invalid("next node %d is given twice", i)
			}
			sets.next |= 1 << j
		}
	}
	addrs := make([]string, len(all))
	for i, n := range all {
		addrs[i] = n.Info().Addr
	}
	sets.name(addrs, nil)
	sets.curAlias = aliasOf(addrs, sets.cur)
	if sets.joint() {
		sets.nextAlias = aliasOf(addrs, sets.next)
	}
	return all, sets, nil
}

// name gives the sets their fingerprints, from the nodes' identities ids
// (nil, or "" for a node not identified yet: its address in addrs stands
// in for it). Once the Client is made, the caller holds the identities'
// mutex (identities.mu), under which jointSets reads the sets.
func (s *nodeSets) name(addrs, ids []string) {
	s.known = len(ids) == len(addrs) && !slices.Contains(ids, "")
	s.curFP = fingerprint(addrs, ids, s.cur)
	if s.joint() {
		s.nextFP = fingerprint(addrs, ids, s.next)
	}
}

// oneNode reports whether a and b are one node: the same driver node, or
// the same address of a driver that names servers by address.
func oneNode(a, b driver.Node) bool {
	if sameNode(a, b) {
		return true
	}
	ia, ib := a.Info(), b.Info()
	return ia.Unique && ib.Unique && ia.Addr == ib.Addr
}

// fingerprint names the nodes of set in configuration records
// (keys.Fingerprint of their identities, keys.Member).
func fingerprint(addrs, ids []string, set uint64) string {
	var members []string
	for i, addr := range addrs {
		if set&(1<<i) != 0 {
			id := ""
			if i < len(ids) {
				id = ids[i]
			}
			members = append(members, keys.Member(id, addr))
		}
	}
	return keys.Fingerprint(members)
}

// aliasOf is the fingerprint of set by its addresses, as releases before
// issue 44 named it.
func aliasOf(addrs []string, set uint64) string {
	var members []string
	for i, addr := range addrs {
		if set&(1<<i) != 0 {
			members = append(members, addr)
		}
	}
	return keys.Fingerprint(members)
}

// ruleDetail is what a QuorumError says of a joint rule after its count.
func ruleDetail(r quorum.Rule) string {
	if !r.IsJoint() {
		return ""
	}
	return " (joint configuration: " + r.String() + ")"
}

// sameNode reports whether a and b are one node: equal values of a
// comparable type (a pointer, as drivers' nodes are).
func sameNode(a, b driver.Node) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}
