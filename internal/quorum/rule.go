package quorum

import (
	"fmt"
	"math/bits"
	"slices"
)

// Rule is which sets of agreeing nodes make a quorum: Need of the nodes of
// one set, or, in a joint configuration (a move from one set of nodes to
// another, docs/reconfiguration.md), a quorum of each of two sets, a node
// of both counting for both. Nodes are their indexes in a round's Nodes,
// as bits of a mask (at most 64). Every decision that counts nodes goes
// through a Rule: a round's outcome, a token rule's "a quorum issued it",
// a refused lock's "no quorum can hold it any more".
type Rule struct {
	sets [2]uint64
	need [2]int
}

// all is the set of every node.
const all = ^uint64(0)

// Count is the rule of one set: q of the nodes.
func Count(q int) Rule { return Rule{sets: [2]uint64{all, 0}, need: [2]int{q, 0}} }

// Joint is the rule of a joint configuration: qa of the nodes of set a and
// qb of the nodes of set b.
func Joint(a uint64, qa int, b uint64, qb int) Rule {
	return Rule{sets: [2]uint64{a, b}, need: [2]int{qa, qb}}
}

// IsJoint reports whether r is a joint configuration's rule.
func (r Rule) IsJoint() bool { return r.sets[1] != 0 }

// Met reports whether the nodes of agreed make a quorum.
func (r Rule) Met(agreed uint64) bool {
	return bits.OnesCount64(agreed&r.sets[0]) >= r.need[0] && bits.OnesCount64(agreed&r.sets[1]) >= r.need[1]
}

// Need is how many nodes must agree at the least: the quorum of one set,
// or the quorums of two sets when none of their nodes is shared (for
// messages; Met decides).
func (r Rule) Need() int {
	if !r.IsJoint() {
		return r.need[0]
	}
	shared := bits.OnesCount64(r.sets[0] & r.sets[1])
	return max(r.need[0], r.need[1], r.need[0]+r.need[1]-shared)
}

// String describes the rule for humans: "3" or "3 of 5 nodes (current)
// and 2 of 3 nodes (next)".
func (r Rule) String() string {
	if !r.IsJoint() {
		return fmt.Sprint(r.need[0])
	}
	return fmt.Sprintf("%d of the %d current nodes and %d of the %d next nodes",
		r.need[0], bits.OnesCount64(r.sets[0]), r.need[1], bits.OnesCount64(r.sets[1]))
}

// Largest returns the largest value v such that the nodes whose value is
// at least v make a quorum, among the nodes of has (vals is indexed by
// node); ok is false when those nodes make none. Resume's validity: the
// time for which a quorum of the nodes still holds a lock.
func (r Rule) Largest(vals []int64, has uint64) (v int64, ok bool) {
	var cand []int64
	for i, x := range vals {
		if has&(1<<i) != 0 {
			cand = append(cand, x)
		}
	}
	slices.Sort(cand)
	for j := len(cand) - 1; j >= 0; j-- {
		var m uint64
		for i, x := range vals {
			if has&(1<<i) != 0 && x >= cand[j] {
				m |= 1 << i
			}
		}
		if r.Met(m) {
			return cand[j], true
		}
	}
	return 0, false
}

// Mask returns the set of nodes i < n for which f is true.
func Mask(n int, f func(i int) bool) uint64 {
	var m uint64
	for i := range n {
		if f(i) {
			m |= 1 << i
		}
	}
	return m
}
