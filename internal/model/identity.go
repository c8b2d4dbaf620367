package model

// Nodes known by identity (docs/reconfiguration.md, "A node's identity"):
// each node keeps a random identity in its data set (Data.ID, id.lua),
// written by the first client to ask; a restart without the data loses
// it, and the next client to ask writes a new one, while a restart with
// the data, from a snapshot and a failover keep it. A joint client reads
// its nodes' identities at its first contact (before its first record,
// the library's engine.admit), a client on one set with the votes of its
// acquires (folds, below), and names its node sets by them from then on,
// as the library does (until a node refuses a vote, below): a client
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
// Every request that can give a vote (an acquire, a refresh, a claim, a
// record round) carries the identity the client learned for the node it
// addresses (Msg.Node, the library's script.Guard.Node), and the node
// refuses it, before any write, when its own differs (OtherNode, epoch.lua's
// node_is): a node that lost its data (no identity, or a new one), or an
// address re-pointed after the first contact (StepRepoint: the requests
// of a client, or of the clients that spell it one way, reach another
// node of the set). The second rounds' raises (fence.lua, seal.lua) are
// not checked, in the library either: a re-point between an acquire's
// two rounds is an open gap (TestRepointBetweenTheRounds).
// The refusal makes the client identify the node again before its next
// attempt (reidentify, the library's identities.refused and identities.check):
// an identity that another of its nodes has makes it refuse its node set
// (Life.Invalid, ErrInvalid); a new one renames the node and its sets'
// fingerprints. The releases carry no check either. On a Redis Cluster,
// and on a go-redis Ring (driver.Info.Spread), the library checks the
// identity at the first contact only (the identity is in another slot,
// or on another shard, than a lock's keys); the model's nodes are
// standalone.
// With the VoteByAddress mutant (the library before the check) no node
// refuses.
//
// A client without records (Conf 0), or with records on one set
// (foldRecords, fold_records.go: its first record rides on its first
// acquire), makes no first contact: it reads each node's identity with
// its acquires (folds, the library's identities.fold, issue 50). An acquire to a node it has not identified
// carries no identity, and the node reads its own after the acquire
// (Msg.ID, id.lua after the script in the library's pipeline); the
// client learns it from the reply, late or not, and a reply whose
// identity another of its nodes has refuses its node set (Invalid): that
// vote does not count, and the attempt is not granted (learnRead,
// decideFirst). The library also gives a won round back then, which the
// model leaves to the keys' expiry, as for any failed attempt. The
// library's first reading waits a little for the late replies, so that
// the obtain that reads a duplicate refuses (awaitReads); the model's
// client learns them whenever they come, which covers every wait.
// TestReadIdentityMatchesModel (root package) plays the same replies
// through the library's reading and this one (ReadIdentity).
//
// Not modelled: a first contact that a node does not answer (the library
// then reads the records conservatively, joint.Sets.Known false, which
// only refuses more and raises the floor to the largest of any set): the
// model's first contact, a joint client's, reads every node's identity,
// down or not, and writes one where there is none, as the library's retry
// does when the node answers. Nor a joint client whose acquires read the
// identity of a node that did not answer its first contact (the library
// does): the model's first contact leaves none. A client on one set
// reads its records as Known false while a node is not identified
// (nodesOf), as the library does.

import (
	"fmt"
	"math/rand/v2"
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
// its nodes (writing one where there is none), through the addresses as
// they lead now (Route), and names its sets; two nodes of one identity
// make it refuse its node set (Life.Invalid, the library's ErrInvalid).
func (m *Model) contact(s *State, ci int) {
	c := &m.Cfg
	cl := &s.Clients[ci]
	if cl.Names.Cur != "" {
		return
	}
	for ni := range c.Nodes {
		if m.member(ci, ni) {
			cl.IDs[ni] = m.identify(s, ci, ni)
		}
	}
	cl.Invalid = m.duplicate(ci, &cl.IDs)
	m.name(s, ci)
}

// identify is id.lua run by client ci on the server that node ni's
// address reaches now.
func (m *Model) identify(s *State, ci, ni int) int {
	return m.identifyOn(s, m.server(s, m.conn(ci), ni))
}

// identifyOn is id.lua run on server srv.
func (m *Model) identifyOn(s *State, srv int) int {
	id := s.Nodes[srv].Data.Identify(s.NextID)
	if id == s.NextID {
		s.NextID++
		s.Version++
	}
	return id
}

// folds reports whether client ci reads its nodes' identities with its
// acquires (the library's identities.fold, without configuration records,
// issue 50): an acquire to a node it has not identified carries no
// identity (Msg.Node 0) and its reply the identity of the server that ran
// it (Msg.ID), which the client learns (learnRead) before it counts the
// vote. A joint client identifies its nodes at its first contact
// (contact), before its first record; with VoteByAddress no client
// identifies.
func (m *Model) folds(ci int) bool {
	return (m.Cfg.Clients[ci].Conf == 0 || m.foldRecords(ci)) && m.Cfg.Nodes >= 2 && !m.Cfg.Mut.VoteByAddress
}

// ReadIdentity is client ci's reading of an acquire reply from node ni
// that carries identity id (learnRead), and whether the reply's vote
// counts: the library's differential test (TestReadIdentityMatchesModel,
// root package) plays the same replies through both.
func (m *Model) ReadIdentity(s *State, ci, ni, id int) bool {
	m.learnRead(s, ci, ni, id)
	return !s.Clients[ci].Invalid
}

// learnRead is the library's identities.learnRead: client ci learns node
// ni's identity id from an acquire's reply, late or not, when it had
// none, and refuses its node set (Invalid) when another of its nodes has
// it; the reply's vote then does not count (deliver), and the attempt is
// not granted (decideFirst).
func (m *Model) learnRead(s *State, ci, ni, id int) {
	cl := &s.Clients[ci]
	if cl.IDs[ni] != 0 || cl.Invalid {
		return
	}
	cl.IDs[ni] = id
	cl.Invalid = m.duplicate(ci, &cl.IDs)
	if m.records(ci) && !cl.Invalid {
		m.name(s, ci) // its sets' names take the identity (foldRecords)
	}
}

// duplicate reports whether two of client ci's nodes have one identity.
func (m *Model) duplicate(ci int, ids *[maxNodes]int) bool {
	seen := map[int]bool{}
	for ni := range m.Cfg.Nodes {
		if id := ids[ni]; m.member(ci, ni) && id != 0 {
			if seen[id] {
				return true
			}
			seen[id] = true
		}
	}
	return false
}

// name names client ci's sets by the identities it learned.
func (m *Model) name(s *State, ci int) {
	c := &m.Cfg
	cl := &s.Clients[ci]
	cs := &c.Clients[ci]
	cur, next := c.setsOf(cs.Conf)
	name := func(set uint64) (string, string) {
		if set == 0 {
			return "", ""
		}
		if c.Mut.BySpelling {
			return m.alias(set, cs.Spelling), ""
		}
		return m.byID(set, func(ni int) int { return cl.IDs[ni] }), m.alias(set, cs.Spelling)
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

// maxNodes bounds Config.Nodes (the arrays of identities and routes).
const maxNodes = 8

// OtherNode is a vote-giving script's refusal on a server whose identity
// is not the one the request names (epoch.lua's node_is: the error reply
// REDLOCK_NODE): no vote, nothing written.
const OtherNode = 100

// maxClients bounds the clients of a Config (State.Route).
const maxClients = 16

// server is the node that connection conn's requests to node ni's address
// reach now: ni, or where the address was re-pointed (Route).
func (m *Model) server(s *State, conn, ni int) int {
	if r := s.Route[conn][ni]; r != 0 {
		return int(r) - 1
	}
	return ni
}

// NodeIs is epoch.lua's node_is: a request that names identity id (0:
// none, before the first contact) may give a vote on a node of data d:
// it names none, or d's. A node that lost its data has none (ID 0), and
// refuses every identity.
func (d *Data) NodeIs(id int) bool { return id == 0 || d.ID == id }

// checksNode reports whether a request of kind checks its node's identity
// (NodeIs) before anything else: those that can give a vote, and the
// second rounds (fence.lua, seal.lua), whose raises on a quorum make the
// token as votes do. The releases do not, as in the library.
func checksNode(kind int) bool {
	switch kind {
	case ReqAcquire, ReqFence, ReqRefresh, ReqClaim, ReqRecord:
		return true
	}
	return false
}

// otherNode reports whether req, on server srv, is refused by the
// identity check (OtherNode): it can give a vote, names an identity (the
// client identified the node) and srv has another, or none.
func (m *Model) otherNode(s *State, srv int, req Msg) bool {
	return !m.Cfg.Mut.VoteByAddress && checksNode(req.Kind) && !s.Nodes[srv].Data.NodeIs(req.Node)
}

// reidentify is the library's identities.check after a refusal
// (identities.refused): client ci reads again the identity of each node
// that refused a vote as another node, through its address as it leads
// now. One that another of its nodes has makes it refuse its node set
// (Invalid); else the node and the client's set names take the identity
// read.
func (m *Model) reidentify(s *State, ci int) {
	cl := &s.Clients[ci]
	for ni := range m.Cfg.Nodes {
		if cl.Unknown&(1<<ni) != 0 {
			cl.IDs[ni] = m.identify(s, ci, ni)
		}
	}
	cl.Unknown = 0
	if m.duplicate(ci, &cl.IDs) {
		cl.Invalid = true
		return
	}
	m.name(s, ci)
}

// A StepRepoint re-points node Node's address to node Arg-1 (Arg 0: back
// to its own) for connection Client, or, with Client = spellAll + sp, for
// the connection of every client that spells the addresses as sp
// (ClientSpec.Spelling). The fault is not among the Enabled steps: the
// random schedules inject it (repointPlan), and the exhaustive searches
// do not.
const spellAll = 100

// repointCan reports whether st may be applied in s (Replay): a
// re-pointing within the budget (Faults.Repoints), or a pointing back.
func (m *Model) repointCan(s *State, st Step) bool {
	c := &m.Cfg
	if st.Node < 0 || st.Node >= c.Nodes || st.Arg < 0 || st.Arg > int64(c.Nodes) || st.Arg == int64(st.Node+1) {
		return false
	}
	if st.Arg == 0 {
		return true
	}
	return s.Faults[faultRepoint] < c.Repoints
}

// can reports whether st may be applied in s.
func (m *Model) can(s *State, st Step) bool {
	if st.Kind == StepRepoint {
		return m.repointCan(s, st)
	}
	return enabled(m.Enabled(s), st)
}

// repoint applies a StepRepoint.
func (m *Model) repoint(s *State, st Step) {
	for ci, cs := range m.Cfg.Clients {
		if ci == st.Client || (st.Client >= spellAll && int(cs.Spelling) == st.Client-spellAll) {
			s.Route[ci][st.Node] = int8(st.Arg)
		}
	}
	if st.Arg != 0 {
		s.Faults[faultRepoint]++
	}
}

// repointPlan is a random schedule's re-pointing (explore.go), drawn at
// its start from a stream of its own, so that the schedules of a seed
// choose their other steps as they did before the fault was modelled
// until it fires: step once client after made its first contact and
// from real time at, and back from back (0: never).
type repointPlan struct {
	step      Step
	after     int
	at, back  int64
	fired, ok bool
}

// drawRepoint draws schedule i's re-pointing (nil: none, half the
// schedules): a client's, or its spelling's, address of one of its nodes
// to another of its nodes.
func (m *Model) drawRepoint(seed uint64, i int) *repointPlan {
	c := &m.Cfg
	if c.Repoints == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed+uint64(i), 0x1d))
	if r.IntN(2) == 0 {
		return nil
	}
	ci := r.IntN(len(c.Clients))
	var nodes []int
	for ni := range c.Nodes {
		if m.member(ci, ni) {
			nodes = append(nodes, ni)
		}
	}
	if len(nodes) < 2 {
		return nil
	}
	k := r.IntN(len(nodes))
	ni, nj := nodes[k], nodes[(k+1+r.IntN(len(nodes)-1))%len(nodes)]
	who := ci
	if r.IntN(2) == 0 {
		who = spellAll + int(c.Clients[ci].Spelling)
	}
	p := &repointPlan{step: Step{Kind: StepRepoint, Client: who, Node: ni, Arg: int64(nj + 1)}, after: ci}
	// Early more often than late: most attempts begin early.
	p.at = 10 + r.Int64N(1+r.Int64N(max(c.Horizon-10, 1)))
	if r.IntN(2) == 0 {
		p.back = p.at + 2 + r.Int64N(20)
	}
	return p
}

// due returns the plan's step when its time has come.
func (p *repointPlan) due(m *Model, s *State) (Step, bool) {
	switch {
	case !p.fired && s.T >= p.at && s.Clients[p.after].Names.Cur != "" && m.repointCan(s, p.step):
		p.fired = true
		return p.step, true
	case p.fired && !p.ok && p.back != 0 && s.T >= p.back:
		p.ok = true
		back := p.step
		back.Arg = 0
		return back, true
	}
	return Step{}, false
}

// describeIdentity says what a re-pointing does, and what a request does
// that reaches another node than its address's.
func (m *Model) describeIdentity(s *State, st Step) (string, bool) {
	at := fmt.Sprintf("t=%d ", s.T)
	switch st.Kind {
	case StepRepoint:
		who := fmt.Sprintf("%c's", rune('A'+st.Client))
		if st.Client >= spellAll {
			who = fmt.Sprintf("spelling %d's", st.Client-spellAll)
		}
		if st.Arg == 0 {
			return fmt.Sprintf("%sn%d's address (%s) is pointed back", at, st.Node+1, who), true
		}
		return fmt.Sprintf("%sn%d's address (%s) is re-pointed to n%d", at, st.Node+1, who, st.Arg), true
	case StepProcess:
		srv := m.server(s, st.Client, st.Node)
		q := s.Conns[st.Client*m.Cfg.Nodes+st.Node].Req[0]
		if m.otherNode(s, srv, q) {
			return fmt.Sprintf("%sn%d's address reaches n%d (identity %d), which refuses %c's %s naming identity %d: REDLOCK_NODE",
				at, st.Node+1, srv+1, s.Nodes[srv].Data.ID, rune('A'+q.Actor), kindName[q.Kind], q.Node), true
		}
		if srv == st.Node {
			return "", false
		}
		// As if the address's node were the server it reaches.
		t := s.Clone()
		t.Nodes[st.Node] = s.Nodes[srv]
		t.Route = [maxClients][maxNodes]int8{}
		return m.describe(t, st) + fmt.Sprintf(" (n%d's address reaches n%d)", st.Node+1, srv+1), true
	}
	return "", false
}
