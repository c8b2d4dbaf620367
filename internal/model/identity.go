package model

// Nodes known by identity (docs/reconfiguration.md, "A node's identity"):
// each node keeps a random identity in its data set (Data.ID, id.lua),
// written by the first client to ask; a restart without the data loses
// it, and the next client to ask writes a new one, while a restart with
// the data, from a snapshot and a failover keep it. A client reads its
// nodes' identities at its first contact (before its first record, the
// library's engine.admit) and names its node sets by them from then on,
// as the library does (a node is identified once per Client): a client
// that contacted the nodes before a node lost its data and one that did
// after name the set differently, and read each other's records as a set
// they do not know. Each client also writes its fields under the sets'
// fingerprints by address (its alias), which depend on how it spells the
// addresses (ClientSpec.Spelling: 1 is one server reached under another
// address, 127.0.0.1 and localhost). The doctor reads the identities
// afresh at each reading.
//
// With the BySpelling mutant (issue 44's finding E) every client names a
// set by its addresses as it spells them, the doctor by its own spelling,
// and the readers of the records count no name they do not know
// (joint.Mut.KnownNamesOnly).
//
// Not modelled: a first contact that a node does not answer (the library
// then reads the records conservatively, joint.Sets.Known false, which
// only refuses more and raises the floor to the largest of any set): the
// model's first contact reads every node's identity, down or not, and
// writes one where there is none, as the library's retry does when the
// node answers.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/internal/joint"
)

// Names are a client's names of its node sets, from its first contact:
// the fingerprints of the current and next sets, and their aliases by
// address ("" when none).
type Names struct {
	Cur, Next, CurAlias, NextAlias string
}

// Identify is id.lua: the node's identity, id written first when it has
// none.
func (d *Data) Identify(id int) int {
	if d.ID == 0 {
		d.ID = id
	}
	return d.ID
}

// fingerprint names a set by its members (keys.Fingerprint: sorted; the
// model's members are short and readable, and never hold a colon).
func fingerprint(members []string) string {
	slices.Sort(members)
	return strings.Join(members, ".")
}

// addr is node ni's address as spelling writes it (keys.Member's
// "addr:").
func addr(ni int, spelling byte) string {
	if spelling == 0 {
		return "h" + strconv.Itoa(ni)
	}
	return "l" + strconv.Itoa(ni)
}

// aliasKey names a set spelled one way.
type aliasKey struct {
	set      uint64
	spelling byte
}

// alias is set's fingerprint by address, as spelling writes the addresses.
func (m *Model) alias(set uint64, spelling byte) string {
	if a, ok := m.aliases[aliasKey{set, spelling}]; ok {
		return a
	}
	return m.makeAlias(set, spelling)
}

func (m *Model) makeAlias(set uint64, spelling byte) string {
	var members []string
	for ni := range m.Cfg.Nodes {
		if set&(1<<ni) != 0 {
			members = append(members, addr(ni, spelling))
		}
	}
	return "@" + fingerprint(members)
}

// byID is set's fingerprint by the identities ids gives (0: the node's
// address stands in, keys.Member).
func (m *Model) byID(set uint64, ids func(ni int) int) string {
	var members []string
	for ni := range m.Cfg.Nodes {
		if set&(1<<ni) == 0 {
			continue
		}
		if id := ids(ni); id != 0 {
			members = append(members, strconv.Itoa(id))
		} else {
			members = append(members, addr(ni, 0))
		}
	}
	return fingerprint(members)
}

// contact is client ci's first contact: it reads the identity of each of
// its nodes (writing one where there is none) and names its sets.
func (m *Model) contact(s *State, ci int) {
	c := &m.Cfg
	cl := &s.Clients[ci]
	if cl.Names.Cur != "" {
		return
	}
	ids := make([]int, c.Nodes)
	for ni := range c.Nodes {
		if m.member(ci, ni) {
			ids[ni] = s.Nodes[ni].Data.Identify(s.NextID)
			if ids[ni] == s.NextID {
				s.NextID++
				s.Version++
			}
		}
	}
	cs := &c.Clients[ci]
	cur, next := c.setsOf(cs.Conf)
	name := func(set uint64) (string, string) {
		if set == 0 {
			return "", ""
		}
		if c.Mut.BySpelling {
			return m.alias(set, cs.Spelling), ""
		}
		return m.byID(set, func(ni int) int { return ids[ni] }), m.alias(set, cs.Spelling)
	}
	n := &cl.Names
	n.Cur, n.CurAlias = name(cur)
	n.Next, n.NextAlias = name(next)
}

// doctorName is the doctor's name of set now: its nodes' identities and,
// as alias, its addresses as the doctor spells them.
func (m *Model) doctorName(s *State, set uint64) joint.SetName {
	if m.Cfg.Mut.BySpelling {
		return joint.SetName{FP: m.alias(set, 0)}
	}
	return joint.SetName{FP: m.byID(set, func(ni int) int { return s.Nodes[ni].Data.ID }), Alias: m.alias(set, 0)}
}
