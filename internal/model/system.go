package model

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
)

// Client kinds (ClientSpec.Kind).
const (
	Plain     = 0   // Obtain: a string key with a random value
	Reentrant = 'o' // the family's write hold with a fixed owner (WithOwner)
	Exclusive = 'x' // the family's write hold with a random owner per acquire
	Shared    = 'r' // the family's read hold
	Permit    = 's' // a semaphore's permit (ObtainPermit; Config.Permits)
)

// ClientSpec is one client's configuration. A client makes one hold at a
// time; several specs with one Owner model re-entry through different
// Clients, and a spec that Shares another's connection models one Client
// that re-enters while it holds (a hold count above one).
type ClientSpec struct {
	Kind     byte  // Plain, Reentrant, Exclusive, Shared or Permit
	Owner    int   // a Reentrant client's owner (> 0)
	Shares   int   // 1 + the index of an earlier spec whose connection it uses; 0: its own
	Mode     byte  // guard: '1', 'p' or '0'
	MaxTTL   int64 // WithMaxTTL; 0: Config.MaxTTL
	TTL      int64 // the lock's TTL; 0: Config.TTL
	Acquires int   // attempts to make
	// Conf is the client's node configuration during a move from
	// Config.SetA to Config.SetB (joint.go): 0 every node, ConfA the
	// current set alone, ConfJoint both, ConfB the next set alone.
	Conf    byte
	Refresh int  // refreshes per held lock
	Release bool // release a held lock (else let it expire)
}

// Faults is the fault plan of a Config: the faults a schedule may
// inject, and the bounds they keep to.
type Faults struct {
	// How many of each, per schedule.
	Restarts     int // restart without data
	DataRestarts int // restart keeping data
	Promotions   int // failover to a lagging replica
	// RestartTime is how long a restarted node is down (> Delta: the
	// assumption that a restart with data is slower than the cache).
	RestartTime int64
	// FailoverTime is how long a failover takes; ReplicaOffsets are the
	// replica machines' clock offsets a promotion may bring.
	FailoverTime   int64
	ReplicaOffsets []int64
	// AssumeBand, when set, refuses promotions that break the documented
	// assumption FailoverTime + (replica - master offset) >= Delta. When
	// false, every offset is allowed (for finding 2's premise, a replica
	// far behind).
	AssumeBand bool
	// LossGap is the real time that must separate two faults that lose
	// data on different nodes (a minority per recovery window).
	LossGap int64
}

// Config bounds a model: its nodes, clients, times and faults. Times are
// integer ticks.
type Config struct {
	Nodes   int
	Clients []ClientSpec
	TTL     int64 // default lock TTL
	MaxTTL  int64 // default max TTL
	// Drift is the validity set aside for clock drift (driftFor).
	Drift       int64
	NodeTimeout int64
	Delta       int64 // EpochTrust
	// FenceTTL is the counters' expiry; 0: MaxTTL. The real one is an
	// hour or ten times maxTTL; the model's is short so that searches
	// meet expired counters. Lemma 1 (docs/fencing.md) needs it no
	// shorter than the spread of the clock offsets (fill checks).
	FenceTTL int64
	Horizon  int64 // real time bound
	Offsets  []int64
	// Second is the node time of a second, for uptime_in_seconds.
	Second int64

	// Faults is the fault plan of every schedule.
	Faults

	// Global says whether properties (a) and (b) are asserted: only under
	// the documented assumptions (guard on for all, one max TTL, offsets
	// and faults in bounds).
	Global bool
	// WriterMark keeps the family's :wwait mark (readers wait behind a
	// refused writer). Without it the explorer drops the mark after every
	// script: readers never wait, which allows every schedule the mark
	// allows and more (the mark is a liveness device only).
	WriterMark bool
	// EndToEndOnly turns property (f) off: the searches then find a
	// broken counter only through its consequence, a token inversion
	// ((b)), which takes longer schedules (TestSearchPower measures both).
	EndToEndOnly bool
	// Permits is the k of the semaphore that Permit clients share.
	Permits int
	// SetA and SetB are the node sets of a move (masks of node indexes),
	// for clients with a Conf.
	SetA, SetB uint64
	Mut        Mutations
}

func (c *Config) fill() {
	for i := range c.Clients {
		cs := &c.Clients[i]
		if cs.MaxTTL == 0 {
			cs.MaxTTL = c.MaxTTL
		}
		if cs.TTL == 0 {
			cs.TTL = c.TTL
		}
		if cs.Mode == 0 {
			cs.Mode = '1'
		}
		if cs.Shares > i || cs.Shares < 0 || (cs.Shares > 0 && c.Clients[cs.Shares-1].Shares != 0) {
			panic("model: Shares must name an earlier client with a connection of its own")
		}
	}
	if c.FenceTTL == 0 {
		c.FenceTTL = c.MaxTTL
	}
	lo, hi := int64(0), int64(0)
	for _, o := range append(slices.Clone(c.Offsets), c.ReplicaOffsets...) {
		lo, hi = min(lo, o), max(hi, o)
	}
	if c.Global && c.FenceTTL < hi-lo {
		panic("model: FenceTTL below the spread of the clock offsets, outside Lemma 1's assumption")
	}
	if c.Second == 0 {
		c.Second = 1
	}
	for len(c.Offsets) < c.Nodes {
		c.Offsets = append(c.Offsets, 0)
	}
}

// Quorum is N/2+1.
func (c *Config) Quorum() int { return c.Nodes/2 + 1 }

// Request kinds.
const (
	ReqAcquire = iota + 1
	ReqFence
	ReqRefresh
	ReqRelease
)

// Msg is a request or a reply on one connection. For a client of the
// family, ReqAcquire is family.lua, ReqFence seal.lua, ReqRefresh
// familyrefresh.lua and ReqRelease familyrelease.lua.
type Msg struct {
	Kind  int
	Actor int       // the client whose round it belongs to (connections may be shared)
	Round int       // the client's round it belongs to
	Value int       // owner value; a family client's hold ID
	Arg   int64     // ttl, or token
	Tok   int64     // a refresh's and a release's: the lock's (hold's) token
	Rec   *RecWrite // a record request's writes (joint_records.go)
	// Reply fields.
	Status  int
	N       int64
	Existed bool        // family acquire: the owner's lock was there
	Counter int64       // family acquire: the node's counter
	Recs    *ConfFields // record: the node's configuration record
}

// Conn is one client's connection to one node: FIFO requests and replies.
type Conn struct {
	Req, Rep []Msg
}

// Node is a simulated Redis node.
type Node struct {
	Offset    int64 // clock: real time + Offset
	Run       int
	Start     int64 // process start, node time
	Replica   bool  // master_replid2 set
	DownUntil int64 // real time before which it answers nothing
	Data      Data
	Copy      Data // its replica's (lagging) copy
	// LostAt (node time) is the last restart or promotion; LostKept says
	// it kept the data (a restart with persistence).
	LostAt   int64
	Lost     bool
	LostKept bool
	LostReal int64 // real time of that fault
	// Conf is its configuration record (joint_records.go).
	Conf ConfFields
}

func (n *Node) env(t int64, second int64) Env {
	now := t + n.Offset
	return Env{Now: now, Run: n.Run, Uptime: floorDiv(now, second) - floorDiv(n.Start, second), Second: second, Replica: n.Replica}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Client phases.
const (
	Idle = iota
	Acquiring
	Won // first round won, second round not started
	Fencing
	Holding
	Refreshing
	Done
)

// Vote states in a round.
const (
	Pending = iota
	Yes
	No
)

// Client is a client following client.go.
type Client struct {
	Phase      int
	AcqLeft    int
	RefLeft    int
	Value      int
	Round      int
	Start      int64 // real time the round started
	ValidUntil int64
	NewValid   int64
	Votes      []int8
	Tokens     []int64
	FirstYes   []bool
	Existed    []bool  // family: the vote found the owner's lock
	Counters   []int64 // family: the node's counter with its vote
	Token      int64
	Grant      int      // index in State.Grants, -1 none
	Rec        Recorder // configuration records (joint_records.go)
}

// Grant is a lock (or hold) handed to the caller.
type Grant struct {
	Client int
	Value  int
	Owner  int  // who shares it: a plain lock's and an exclusive hold's own
	Read   bool // a read hold
	Permit bool // a semaphore's permit
	Token  int64
	Began  int64 // real time the acquire started
	At     int64 // real time of the grant
	End    int64 // real end of validity (validUntil, or the release)
}

// conflicts reports whether two grants exclude each other: different
// owners, unless both read.
func (g Grant) conflicts(e Grant) bool {
	return g.Owner != e.Owner && !(g.Read && e.Read) && !(g.Permit && e.Permit)
}

// State is the whole system.
type State struct {
	T       int64
	Nodes   []Node
	Clients []Client
	Conns   []Conn // client*Nodes + node
	Grants  []Grant
	NextRun int
	NextVal int
	Faults  [3]int // restarts, data restarts, promotions used
}

// Step kinds.
const (
	StepTick = iota
	StepProcess
	StepDeliver
	StepClient
	StepRestart
	StepDataRestart
	StepPromote
	StepSync
)

// Step is one transition. Client and Node select the actor; Arg the
// replica offset of a promotion.
type Step struct {
	Kind   int
	Client int
	Node   int
	Arg    int64
}

// Violation is a broken property.
type Violation struct {
	Prop string // "exclusion", "token", "refresh", "recovery"
	Msg  string
}

func (v *Violation) Error() string { return v.Prop + ": " + v.Msg }

// Model is a configured model.
type Model struct {
	Cfg Config
	// NoShrink makes Random return a failing schedule as it was played,
	// without shrinking it (to measure how fast a search finds a bug).
	NoShrink bool
}

// New returns a model of cfg.
func New(cfg Config) *Model {
	cfg.fill()
	return &Model{Cfg: cfg}
}

// Init is the initial state: nodes up for a while, empty, no record.
func (m *Model) Init() *State {
	c := &m.Cfg
	s := &State{T: 10 * c.Second, NextRun: c.Nodes + 1, NextVal: 1}
	for i := range c.Nodes {
		s.Nodes = append(s.Nodes, Node{Offset: c.Offsets[i], Run: i + 1, Start: -100 * c.Second})
	}
	for _, cs := range c.Clients {
		s.Clients = append(s.Clients, Client{AcqLeft: cs.Acquires, Grant: -1,
			Votes: make([]int8, c.Nodes), Tokens: make([]int64, c.Nodes), FirstYes: make([]bool, c.Nodes),
			Existed: make([]bool, c.Nodes), Counters: make([]int64, c.Nodes)})
	}
	s.Conns = make([]Conn, c.Nodes*len(c.Clients))
	return s
}

// Clone deep-copies s.
func (s *State) Clone() *State {
	t := *s
	t.Nodes = slices.Clone(s.Nodes)
	t.Clients = slices.Clone(s.Clients)
	for i := range t.Clients {
		c := &t.Clients[i]
		c.Votes, c.Tokens, c.FirstYes = slices.Clone(c.Votes), slices.Clone(c.Tokens), slices.Clone(c.FirstYes)
		c.Existed, c.Counters = slices.Clone(c.Existed), slices.Clone(c.Counters)
		c.Rec.Votes, c.Rec.Reps = slices.Clone(c.Rec.Votes), slices.Clone(c.Rec.Reps)
	}
	t.Conns = slices.Clone(s.Conns)
	for i := range t.Conns {
		t.Conns[i].Req, t.Conns[i].Rep = slices.Clone(s.Conns[i].Req), slices.Clone(s.Conns[i].Rep)
	}
	t.Grants = slices.Clone(s.Grants)
	return &t
}

// conn is the connection client ci uses: its own, or the one it shares.
func (m *Model) conn(ci int) int {
	if sh := m.Cfg.Clients[ci].Shares; sh > 0 {
		return sh - 1
	}
	return ci
}

// family reports whether client ci takes holds of the lock family.
func (m *Model) family(ci int) bool {
	k := m.Cfg.Clients[ci].Kind
	return k != Plain && k != Permit
}

// permit reports whether client ci takes permits of the semaphore.
func (m *Model) permit(ci int) bool { return m.Cfg.Clients[ci].Kind == Permit }

// quorum is client ci's quorum: N/2+1, or PermitQuorum for a permit
// (a majority with the PermitMajority mutant).
func (m *Model) quorum(ci int) int {
	if m.permit(ci) && !m.Cfg.Mut.PermitMajority {
		return PermitQuorum(m.Cfg.Nodes, m.Cfg.Permits)
	}
	return m.Cfg.Quorum()
}

// holdOf returns the mode and owner of client ci's hold with value v (a
// plain lock's owner is its value, offset so that it is nobody else's).
func (m *Model) holdOf(ci, v int) (mode byte, owner int) {
	switch cs := m.Cfg.Clients[ci]; cs.Kind {
	case Reentrant:
		return 'w', cs.Owner
	case Exclusive:
		return 'w', 1<<20 + v
	case Shared:
		return 'r', 0
	case Permit:
		return 's', 1<<22 + v
	}
	return 'w', 1<<21 + v
}

func (m *Model) guard(ci int) Guard {
	cs := m.Cfg.Clients[ci]
	return Guard{MaxTTL: cs.MaxTTL, Delta: m.Cfg.Delta, Mode: cs.Mode, FenceTTL: m.Cfg.FenceTTL}
}

// Enabled lists the steps possible in s, in a fixed order.
func (m *Model) Enabled(s *State) []Step {
	c := &m.Cfg
	var out []Step
	busy := false
	// Partial-order reduction: delivering a reply changes only its
	// client's votes, and commutes with every step of other clients and
	// nodes and with time passing. It conflicts only with its client's
	// decision, so when that decision is not possible yet (or the reply is
	// late anyway), delivering first is the only order explored.
	for ci := range s.Clients {
		for ni := range c.Nodes {
			rep := s.Conns[ci*c.Nodes+ni].Rep
			if len(rep) == 0 {
				continue
			}
			if rep[0].Kind == ReqRecord {
				// The same for a record reply and its recorder's decision.
				if a := rep[0].Actor; m.recDecided(s, a) || !m.recDecidable(s, a) {
					return []Step{{Kind: StepDeliver, Client: ci, Node: ni}}
				}
				continue
			}
			if a := rep[0].Actor; m.countsDecided(s, a) || !m.clientCan(s, a) {
				return []Step{{Kind: StepDeliver, Client: ci, Node: ni}}
			}
		}
	}
	for ci := range s.Clients {
		if m.clientCan(s, ci) {
			out = append(out, Step{Kind: StepClient, Client: ci})
		}
		if m.recordCan(s, ci) {
			out = append(out, Step{Kind: StepRecord, Client: ci})
		}
		if s.Clients[ci].Phase != Done {
			busy = true
		}
		if m.conn(ci) != ci {
			continue
		}
		for ni := range c.Nodes {
			cn := &s.Conns[ci*c.Nodes+ni]
			if len(cn.Req) > 0 && s.T >= s.Nodes[ni].DownUntil {
				out = append(out, Step{Kind: StepProcess, Client: ci, Node: ni})
			}
			if len(cn.Rep) > 0 {
				out = append(out, Step{Kind: StepDeliver, Client: ci, Node: ni})
			}
		}
	}
	if !busy {
		return nil // every client is done: no grant can follow
	}
	if s.T < c.Horizon && !m.recordDue(s) {
		out = append(out, Step{Kind: StepTick})
	}
	for ni := range c.Nodes {
		n := &s.Nodes[ni]
		if s.T < n.DownUntil {
			continue
		}
		if s.Faults[0] < c.Restarts && m.lossOK(s, ni) {
			out = append(out, Step{Kind: StepRestart, Node: ni})
		}
		if s.Faults[1] < c.DataRestarts && m.lossOK(s, ni) {
			out = append(out, Step{Kind: StepDataRestart, Node: ni})
		}
		if s.Faults[2] < c.Promotions {
			if n.Copy != m.replicated(n.Data) {
				out = append(out, Step{Kind: StepSync, Node: ni})
			}
			if m.lossOK(s, ni) {
				for _, off := range c.ReplicaOffsets {
					if c.AssumeBand && c.FailoverTime+off-n.Offset < c.Delta {
						continue
					}
					out = append(out, Step{Kind: StepPromote, Node: ni, Arg: off})
				}
			}
		}
	}
	return out
}

// lossOK: no other node lost data within LossGap (a minority loses data
// per recovery window).
func (m *Model) lossOK(s *State, ni int) bool {
	for j := range s.Nodes {
		if j != ni && s.Nodes[j].Lost && s.T-s.Nodes[j].LostReal < m.Cfg.LossGap {
			return false
		}
	}
	return true
}

// clientCan reports whether client ci has a local step.
func (m *Model) clientCan(s *State, ci int) bool {
	c := &s.Clients[ci]
	cs := m.Cfg.Clients[ci]
	switch c.Phase {
	case Idle:
		return m.mayStart(s, ci) && c.Rec.Phase == recIdle // start an attempt, or finish
	case Checking:
		return c.Rec.Phase == recIdle
	case Acquiring, Fencing, Refreshing:
		return m.decidable(s, ci)
	case Won:
		return true
	case Holding:
		return true // refresh, release, or give up
	}
	_ = cs
	return false
}

// counts returns the yes and pending counts of the current round.
func (m *Model) counts(c *Client) (yes, pending int) {
	for _, v := range c.Votes {
		switch v {
		case Yes:
			yes++
		case Pending:
			pending++
		}
	}
	return
}

// decidable: the round's loop has stopped reading replies, every node
// answered, or the node timeout has passed.
func (m *Model) decidable(s *State, ci int) bool {
	c := &s.Clients[ci]
	_, pending := m.counts(c)
	return m.countsDecided(s, ci) || pending == 0 || s.T >= c.Start+m.Cfg.NodeTimeout
}

// countsDecided: the round's loop has stopped reading replies (quorum.Round's
// decided): a quorum agreed and, for the first round of a write hold of the
// family, the votes are enough (enough); or a quorum can no longer agree.
func (m *Model) countsDecided(s *State, ci int) bool {
	cl := &s.Clients[ci]
	yes, pending := m.masks(cl)
	if !m.met(ci, yes|pending) {
		return true
	}
	return m.met(ci, yes) && m.enough(ci, cl)
}

// enough is family.enough (kind.go), the Enough of the first round of a
// write hold (reentrant or exclusive): when a yes-vote found the owner's
// lock, the round waits for more replies (up to every node's, or the node
// timeout) until a quorum of them agree on one recorded token t > 0
// (FamilyToken's rule 1). Every other round decides on the count of
// yes-votes. With the DecideAtQuorum mutant, no round waits.
func (m *Model) enough(ci int, cl *Client) bool {
	if cl.Phase != Acquiring || !m.family(ci) || m.Cfg.Clients[ci].Kind == Shared || m.Cfg.Mut.DecideAtQuorum {
		return true
	}
	existed := false
	for i, v := range cl.Votes {
		if v != Yes || !cl.Existed[i] {
			continue
		}
		existed = true
		if cl.Tokens[i] <= 0 {
			continue
		}
		same := 0
		for j, w := range cl.Votes {
			if w == Yes && cl.Existed[j] && cl.Tokens[j] == cl.Tokens[i] {
				same++
			}
		}
		if same >= m.quorum(ci) {
			return true
		}
	}
	return !existed
}

// send queues msg from client ci to every node.
func (m *Model) send(s *State, ci int, msg Msg) {
	nodes := m.Cfg.Nodes
	msg.Actor = ci
	for ni := range nodes {
		if !m.member(ci, ni) {
			continue
		}
		cn := &s.Conns[m.conn(ci)*nodes+ni]
		cn.Req = append(cn.Req, msg)
	}
}

// Apply performs step st on s (which it modifies) and returns the first
// property it breaks, if any.
func (m *Model) Apply(s *State, st Step) *Violation {
	c := &m.Cfg
	switch st.Kind {
	case StepTick:
		s.T++
		return m.countersKept(s)
	case StepProcess:
		return m.process(s, st.Client, st.Node)
	case StepDeliver:
		m.deliver(s, st.Client, st.Node)
	case StepClient:
		return m.clientStep(s, st.Client)
	case StepRecord:
		m.recordStep(s, st.Client)
	case StepRestart, StepDataRestart, StepPromote:
		n := &s.Nodes[st.Node]
		down := c.RestartTime
		switch st.Kind {
		case StepRestart:
			n.Data = Data{}
			n.Copy = Data{}
			s.Faults[0]++
		case StepDataRestart:
			// The fast path's key is not in the AOF (an RDB snapshot
			// could carry it, but it would have expired: a restart takes
			// longer than delta).
			n.Data.Ok = OkKey{}
			s.Faults[1]++
		case StepPromote:
			n.Data = n.Copy
			n.Offset = st.Arg
			s.Faults[2]++
			down = c.FailoverTime
		}
		n.Run = s.NextRun
		s.NextRun++
		n.Replica = st.Kind == StepPromote
		n.DownUntil = s.T + down
		n.Start = s.T + n.Offset
		if st.Kind == StepPromote {
			n.Start = -100 * c.Second // the replica's process ran long
		}
		n.Lost, n.LostKept, n.LostReal, n.LostAt = true, st.Kind == StepDataRestart, s.T, s.T+n.Offset
		// Connections break: requests and replies in flight are lost.
		for ci := range s.Clients {
			cn := &s.Conns[ci*c.Nodes+st.Node]
			cn.Req, cn.Rep = nil, nil
		}
	case StepSync:
		n := &s.Nodes[st.Node]
		n.Copy = m.replicated(n.Data)
	}
	return nil
}

// replicated is what a replica receives of d: everything but the guard's
// fast-path key, which is written with replication off (unless the
// OkKeyReplicated mutant). The waiters mark is left out too: it only
// decides whether a release publishes, which the explorer does not check.
func (m *Model) replicated(d Data) Data {
	d.Waiters = Mark{}
	if !m.Cfg.Mut.OkKeyReplicated {
		d.Ok = OkKey{}
	}
	return d
}

// countersKept checks (f) after time passed: no node's counter reads lower
// than a tick before (an expired counter reads as the node's time x
// TokenSeed: above every value it held, docs/fencing.md, Lemma 1).
func (m *Model) countersKept(s *State) *Violation {
	if !m.Cfg.Global || m.Cfg.EndToEndOnly {
		return nil
	}
	for ni := range s.Nodes {
		n := &s.Nodes[ni]
		now := s.T + n.Offset
		if before, after := n.Data.CounterRead(now-1), n.Data.CounterRead(now); after < before {
			return &Violation{"counter", fmt.Sprintf("n%d's counter reads %d at node time %d, %d before", ni+1, after, now, before)}
		}
	}
	return nil
}

// process runs the request at the head of connection ci to node ni.
func (m *Model) process(s *State, conn, ni int) *Violation {
	c := &m.Cfg
	cn := &s.Conns[conn*c.Nodes+ni]
	req := cn.Req[0]
	cn.Req = cn.Req[1:]
	if req.Kind == ReqRecord {
		cn.Rep = append(cn.Rep, m.processRecord(s, ni, req))
		return nil
	}
	ci := req.Actor
	cs := c.Clients[ci]
	n := &s.Nodes[ni]
	env := n.env(s.T, c.Second)
	before := n.Data.CounterRead(env.Now)
	g := m.guard(ci)
	rep := Msg{Kind: req.Kind, Actor: ci, Round: req.Round, Value: req.Value}
	voted := false
	mode, owner := m.holdOf(ci, req.Value)
	switch {
	case m.permit(ci):
		switch req.Kind {
		case ReqAcquire:
			rep.Status, rep.N = n.Data.PermAcquire(env, c.Permits, req.Value, req.Arg, g, c.Mut)
			voted = rep.Status == Taken
		case ReqFence:
			n.Data.Raise(env, req.Arg, g, c.Mut)
			rep.Status = 1
		case ReqRefresh:
			rep.Status = n.Data.PermRefresh(env, c.Permits, req.Value, req.Arg, req.Tok, g, c.Mut)
			voted = rep.Status == Reseeded
		case ReqRelease:
			if deleted, _, _ := n.Data.PermRelease(env, req.Value, req.Tok, true, g, c.Mut); deleted {
				rep.Status = 1
			}
		}
	case m.family(ci):
		switch req.Kind {
		case ReqAcquire:
			rep.Status, rep.N, rep.Existed, rep.Counter = n.Data.FamAcquire(env, mode, owner, req.Value, req.Arg, g, c.Mut)
			voted = rep.Status == Taken
		case ReqFence:
			n.Data.Seal(env, req.Arg, owner, g, c.Mut) // a reader's owner is 0: nothing recorded
			rep.Status = 1
		case ReqRefresh:
			rep.Status = n.Data.FamRefresh(env, mode, owner, req.Value, req.Arg, req.Tok, g, c.Mut)
			voted = rep.Status == Reseeded
		case ReqRelease:
			if deleted, _, _ := n.Data.FamRelease(env, mode, owner, req.Value, req.Tok, true, g, c.Mut); deleted {
				rep.Status = 1
			}
		}
		if !c.WriterMark {
			n.Data.WWait = Mark{}
		}
	case req.Kind == ReqAcquire:
		rep.Status, rep.N = n.Data.Acquire(env, req.Value, req.Arg, g, c.Mut)
		voted = rep.Status == Taken
	case req.Kind == ReqFence:
		n.Data.Raise(env, req.Arg, g, c.Mut)
		rep.Status = 1
	case req.Kind == ReqRefresh:
		rep.Status = n.Data.Refresh(env, req.Value, req.Arg, req.Tok, g, c.Mut)
		voted = rep.Status == Reseeded
	case req.Kind == ReqRelease:
		if deleted, _ := n.Data.Release(env, req.Value, req.Tok, true, g, c.Mut); deleted {
			rep.Status = 1
		}
	}
	cn.Rep = append(cn.Rep, rep)
	// (f) counters: the script leaves the counter reading no lower, and a
	// vote reports at least what it read: one more for a token it issued,
	// as much for a counter beside a re-entry.
	if c.Global && !c.EndToEndOnly {
		reported := int64(-1)
		switch {
		case !voted || req.Kind != ReqAcquire:
		case rep.Existed:
			reported = rep.Counter
		default:
			reported = rep.N - 1
		}
		if after := n.Data.CounterRead(env.Now); after < before {
			return &Violation{"counter", fmt.Sprintf("n%d's counter reads %d after c%d's %s, %d before", ni+1, after, ci, kindName[req.Kind], before)}
		}
		if reported >= 0 && reported < before {
			return &Violation{"counter", fmt.Sprintf("n%d reports counter %d to c%d, below the %d it reads", ni+1, reported, ci, before)}
		}
	}
	// (e) recovery: a guarded node votes only maxTTL after it may have
	// lost writes (a 'p' client trusts a restart that kept the data).
	if voted && cs.Mode != '0' && n.Lost && env.Now < n.LostAt+cs.MaxTTL && !(cs.Mode == 'p' && n.LostKept) {
		return &Violation{"recovery", fmt.Sprintf("n%d votes for c%d at node time %d, %d after its fault (max TTL %d)",
			ni+1, ci, env.Now, env.Now-n.LostAt, cs.MaxTTL)}
	}
	return nil
}

// deliver hands the reply at the head of connection conn from node ni to
// its client.
func (m *Model) deliver(s *State, conn, ni int) {
	c := &m.Cfg
	cn := &s.Conns[conn*c.Nodes+ni]
	rep := cn.Rep[0]
	cn.Rep = cn.Rep[1:]
	if rep.Kind == ReqRecord {
		m.deliverRecord(s, ni, rep)
		return
	}
	cl := &s.Clients[rep.Actor]
	if rep.Round != cl.Round || cl.Votes[ni] != Pending || m.countsDecided(s, rep.Actor) {
		return // late: cannot create a grant
	}
	switch {
	case cl.Phase == Acquiring && rep.Kind == ReqAcquire:
		if rep.Status == Taken {
			cl.Votes[ni], cl.Tokens[ni] = Yes, rep.N
			cl.Existed[ni], cl.Counters[ni] = rep.Existed, rep.Counter
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Fencing && rep.Kind == ReqFence:
		anyNode := c.Mut.FenceCountsAnyNode
		if m.family(rep.Actor) {
			anyNode = c.Mut.SealCountsAnyNode
		}
		if cl.FirstYes[ni] || anyNode {
			cl.Votes[ni] = Yes
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Refreshing && rep.Kind == ReqRefresh:
		if rep.Status == Extended || rep.Status == Reseeded {
			cl.Votes[ni] = Yes
		} else {
			cl.Votes[ni] = No
		}
	}
}

func (m *Model) newRound(s *State, ci int) {
	cl := &s.Clients[ci]
	cl.Round++
	cl.Start = s.T
	for i := range cl.Votes {
		cl.Votes[i] = Pending
		if !m.member(ci, i) {
			cl.Votes[i] = No
		}
	}
}

func (m *Model) clientStep(s *State, ci int) *Violation {
	v := m.clientStep1(s, ci)
	if cl := &s.Clients[ci]; cl.Phase == Idle && cl.AcqLeft == 0 {
		cl.Phase = Done
	}
	return v
}

func (m *Model) clientStep1(s *State, ci int) *Violation {
	c := &m.Cfg
	cs := c.Clients[ci]
	cl := &s.Clients[ci]
	switch cl.Phase {
	case Idle, Checking:
		if cl.AcqLeft == 0 {
			cl.Phase = Done
			return nil
		}
		if m.checkConfig(s, ci) {
			return nil // records first (again, if the record took too long)
		}
		cl.Phase = Idle
		cl.AcqLeft--
		if cl.Rec.Conflict {
			return nil // ErrConfigConflict
		}
		// Values per client and attempt, so that equal states hash equal
		// whatever order the clients started in.
		cl.Value = (ci+1)*64 + cs.Acquires - cl.AcqLeft
		m.newRound(s, ci)
		cl.ValidUntil = s.T + cs.TTL - c.Drift
		for i := range cl.Tokens {
			cl.Tokens[i], cl.Existed[i], cl.Counters[i] = 0, false, 0
		}
		cl.Phase = Acquiring
		m.send(s, ci, Msg{Kind: ReqAcquire, Round: cl.Round, Value: cl.Value, Arg: cs.TTL})
	case Acquiring:
		yes, _ := m.masks(cl)
		if !m.met(ci, yes) || s.T >= cl.ValidUntil {
			cl.Phase = Idle
			return nil
		}
		for i, v := range cl.Votes {
			cl.FirstYes[i] = v == Yes
		}
		if m.family(ci) {
			var seal bool
			cl.Token, seal = m.familyToken(cl)
			if !seal {
				return m.grant(s, ci)
			}
			cl.Phase = Won
			return nil
		}
		cl.Token = 0
		for i, v := range cl.Votes {
			if v == Yes && cl.Tokens[i] > cl.Token {
				cl.Token = cl.Tokens[i]
			}
		}
		var equal uint64
		for i, v := range cl.Votes {
			if v == Yes && cl.Tokens[i] == cl.Token {
				equal |= 1 << i
			}
		}
		raise := !m.met(ci, equal)
		if m.moveFloor(s, ci) {
			raise = true
		}
		if !raise || c.Mut.NoSecondRound {
			return m.grant(s, ci)
		}
		cl.Phase = Won
	case Won:
		m.newRound(s, ci)
		cl.Phase = Fencing
		m.send(s, ci, Msg{Kind: ReqFence, Round: cl.Round, Value: cl.Value, Arg: cl.Token})
	case Fencing:
		yes, _ := m.masks(cl)
		if !m.met(ci, yes) || s.T >= cl.ValidUntil {
			cl.Phase = Idle // the lock is given back (release not modelled)
			return nil
		}
		return m.grant(s, ci)
	case Holding:
		g := &s.Grants[cl.Grant]
		switch {
		case s.T >= cl.ValidUntil:
			cl.Phase = Idle // lost
		case cl.RefLeft > 0:
			cl.RefLeft--
			m.newRound(s, ci)
			cl.NewValid = s.T + cs.TTL - c.Drift
			cl.Phase = Refreshing
			m.send(s, ci, Msg{Kind: ReqRefresh, Round: cl.Round, Value: cl.Value, Arg: cs.TTL, Tok: cl.Token})
		default:
			if cs.Release {
				g.End = min(g.End, s.T)
				m.send(s, ci, Msg{Kind: ReqRelease, Round: cl.Round, Value: cl.Value, Tok: cl.Token})
			}
			cl.Phase = Idle
		}
	case Refreshing:
		yes, _ := m.masks(cl)
		g := &s.Grants[cl.Grant]
		if m.met(ci, yes) && s.T < cl.ValidUntil && s.T < cl.NewValid {
			// (c): the extension rests on a quorum of agreeing replies.
			if v := m.refreshQuorum(s, ci); v != nil {
				return v
			}
			cl.ValidUntil = cl.NewValid
			g.End = cl.NewValid
			if v := m.exclusive(s, ci); v != nil {
				return v
			}
		} else if cl.NewValid < cl.ValidUntil {
			cl.ValidUntil = cl.NewValid
			g.End = min(g.End, cl.NewValid)
		}
		cl.Phase = Holding
	}
	return nil
}

// FamVote is a yes-vote of a family acquire's first round: the token the
// node returned, whether it found the owner's lock (then the token is the
// recorded t) and the node's counter.
type FamVote struct {
	Token   int64
	Existed bool
	Counter int64
}

// FamilyToken is the client's token rule for the lock family
// (docs/lock-family.md, "Fencing tokens", rules 1 and 2; family.go's
// familyToken), on the yes-votes of a first round with quorum q. It
// returns the token and whether the seal round must confirm it.
//
// Rule 1 (continuing tenure): at least q of the yes-votes found the
// owner's lock and report one recorded token t > 0: the token is t, no
// second round. Rule 2 (new tenure): the largest of each fresh vote's
// token and one more than the counter of each vote that found the lock;
// no second round only when no vote found the lock and q votes issued that
// token.
func FamilyToken(q int, yes []FamVote, mut Mutations) (int64, bool) {
	if mut.Rule1AnyExisted {
		var t int64
		for _, v := range yes {
			if v.Existed && v.Token > t {
				t = v.Token
			}
		}
		if t > 0 {
			return t, false
		}
	}
	for _, v := range yes {
		if !v.Existed || v.Token <= 0 {
			continue
		}
		same := 0
		for _, w := range yes {
			if w.Existed && w.Token == v.Token {
				same++
			}
		}
		if same >= q {
			return v.Token, false
		}
	}
	var token int64
	existed := false
	for _, v := range yes {
		x := v.Token
		if v.Existed {
			existed = true
			x = v.Counter + 1
			switch {
			case mut.Rule2ExistedCounter:
				x = v.Counter
			case mut.Rule2RecordedToken:
				x = v.Token + 1
			}
		}
		token = max(token, x)
	}
	issued := 0
	for _, v := range yes {
		if !v.Existed && v.Token == token {
			issued++
		}
	}
	return token, existed || issued < q
}

// familyToken applies FamilyToken to cl's first round.
func (m *Model) familyToken(cl *Client) (int64, bool) {
	var yes []FamVote
	for i, v := range cl.Votes {
		if v == Yes {
			yes = append(yes, FamVote{cl.Tokens[i], cl.Existed[i], cl.Counters[i]})
		}
	}
	return FamilyToken(m.Cfg.Quorum(), yes, m.Cfg.Mut)
}

// refreshQuorum checks (c): a quorum of this round's replies agreed.
func (m *Model) refreshQuorum(s *State, ci int) *Violation {
	cl := &s.Clients[ci]
	if yes, _ := m.masks(cl); !m.met(ci, yes) {
		return &Violation{"refresh", fmt.Sprintf("c%d extended its lock with the yes-votes of %b", ci, yes)}
	}
	return nil
}

// grant hands the lock to client ci and checks (a) and (b).
func (m *Model) grant(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	cl.Phase = Holding
	cl.RefLeft = c.Clients[ci].Refresh
	mode, owner := m.holdOf(ci, cl.Value)
	s.Grants = append(s.Grants, Grant{Client: ci, Value: cl.Value, Owner: owner, Read: mode == 'r', Permit: mode == 's',
		Token: cl.Token, Began: cl.ValidUntil - c.Clients[ci].TTL + c.Drift, At: s.T, End: cl.ValidUntil})
	cl.Grant = len(s.Grants) - 1
	if v := m.exclusive(s, ci); v != nil {
		return v
	}
	if !c.Global {
		return nil
	}
	g := s.Grants[cl.Grant]
	for _, e := range s.Grants[:cl.Grant] {
		switch {
		case g.Permit && e.Permit && g.Began > e.At && e.Token >= g.Token:
			// (b) for permits: a permit whose acquire began after another
			// was granted has a higher token. (Concurrent acquires of
			// permits are not ordered, and may share a token.)
			return &Violation{"token", fmt.Sprintf("c%d's permit granted token %d at t=%d (began at %d) after c%d's permit got token %d at t=%d",
				ci, g.Token, g.At, g.Began, e.Client, e.Token, e.At)}
		case g.conflicts(e) && e.Token >= g.Token:
			return &Violation{"token", fmt.Sprintf("c%d granted token %d at t=%d after c%d got token %d at t=%d",
				ci, g.Token, g.At, e.Client, e.Token, e.At)}
		case !g.conflicts(e) && !g.Read && g.Began > e.At && e.End > g.At && e.Token > g.Token:
			// One owner's holds: a re-entry that began after another
			// hold of the owner was granted, and is granted while that
			// one is valid, gets a token no lower than that one's.
			// (Concurrent acquires of one owner are not ordered.)
			return &Violation{"token", fmt.Sprintf("c%d granted token %d at t=%d (began at %d) while c%d's hold of the same owner, granted at %d with token %d, is valid until %d",
				ci, g.Token, g.At, g.Began, e.Client, e.At, e.Token, e.End)}
		}
	}
	return nil
}

// exclusive checks (a): no other owner's grant is valid now.
func (m *Model) exclusive(s *State, ci int) *Violation {
	if !m.Cfg.Global {
		return nil
	}
	g := s.Grants[s.Clients[ci].Grant]
	if g.Permit {
		return m.permits(s, ci)
	}
	for _, e := range s.Grants {
		if g.conflicts(e) && e.At <= s.T && s.T < e.End {
			return &Violation{"exclusion", fmt.Sprintf("c%d holds the lock at t=%d while c%d's grant of t=%d is valid until %d",
				ci, s.T, e.Client, e.At, e.End)}
		}
	}
	return nil
}

// permits checks (a) for a semaphore: at most Permits of its permits are
// valid at once.
func (m *Model) permits(s *State, ci int) *Violation {
	valid := 0
	for _, e := range s.Grants {
		if e.Permit && e.At <= s.T && s.T < e.End {
			valid++
		}
	}
	if valid > m.Cfg.Permits {
		return &Violation{"exclusion", fmt.Sprintf("%d permits of %d valid at t=%d (c%d's the latest)", valid, m.Cfg.Permits, s.T, ci)}
	}
	return nil
}

var seed = maphash.MakeSeed()

// Hash is a hash of s for the visited set. Grants are summarized by what
// the properties can still use: the tokens and validity ends.
func (s *State) Hash() uint64 {
	b := make([]byte, 0, 512)
	v := func(x int64) { b = binary.AppendVarint(b, x) }
	v(s.T)
	for _, n := range s.Nodes {
		v(n.Offset)
		v(int64(n.Run))
		v(n.Start)
		v(b2i(n.Replica))
		v(n.DownUntil)
		for _, d := range []*Data{&n.Data, &n.Copy} {
			// The waiters mark is left out: nothing but a release's
			// notification reads it.
			v(int64(d.Lock.Owner))
			v(d.Lock.Exp)
			f := &d.Fam
			v(b2i(f.OK))
			if f.OK {
				v(int64(f.Mode))
				v(int64(f.K))
				v(int64(f.Owner))
				v(f.T)
				v(f.Exp)
				for _, h := range f.Holds {
					v(int64(h.ID))
					v(h.Exp)
				}
			}
			v(b2i(d.WWait.OK))
			v(d.WWait.Exp)
			v(b2i(d.Fence.OK))
			v(d.Fence.V)
			v(d.Fence.Exp)
			v(b2i(d.Ok.OK))
			v(d.Ok.MaxTTL)
			v(d.Ok.Floor)
			v(d.Ok.Exp)
			r := d.Rec
			v(b2i(r.OK))
			v(int64(r.Run))
			v(r.Base)
			v(r.MaxTTL)
			v(int64(r.Kind))
			v(r.Check)
			v(r.Until)
			v(b2i(r.Changed))
		}
		for _, f := range n.Conf {
			v(f.Exp)
			v(f.M)
			v(f.V)
		}
		v(n.LostAt)
		v(b2i(n.Lost))
		v(b2i(n.LostKept))
		v(n.LostReal)
	}
	for _, c := range s.Clients {
		v(int64(c.Phase))
		v(int64(c.AcqLeft))
		v(int64(c.RefLeft))
		v(int64(c.Value))
		v(int64(c.Round))
		v(c.Start)
		v(c.ValidUntil)
		v(c.NewValid)
		v(c.Token)
		v(int64(c.Grant))
		r := &c.Rec
		v(int64(r.Phase))
		v(int64(r.Round))
		v(b2i(r.All))
		v(r.Began)
		v(r.Start)
		v(b2i(r.Has))
		v(r.Last)
		v(b2i(r.Conflict))
		v(b2i(r.PConflict))
		v(r.Floor)
		v(r.PFloor)
		for i := range r.Votes {
			v(int64(r.Votes[i]))
			v(r.Reps[i].Now)
			v(r.Reps[i].At)
			for _, f := range r.Reps[i].F {
				v(f.Exp)
				v(f.M)
				v(f.V)
			}
		}
		for i := range c.Votes {
			v(int64(c.Votes[i]))
			v(c.Tokens[i])
			v(b2i(c.FirstYes[i]))
			v(b2i(c.Existed[i]))
			v(c.Counters[i])
		}
	}
	for _, cn := range s.Conns {
		v(int64(len(cn.Req)))
		for _, q := range cn.Req {
			v(int64(q.Actor))
			v(q.Tok)
			v(int64(q.Kind))
			v(int64(q.Round))
			v(int64(q.Value))
			v(q.Arg)
			hashRec(v, q.Rec)
		}
		v(int64(len(cn.Rep)))
		for _, q := range cn.Rep {
			v(int64(q.Actor))
			v(int64(q.Kind))
			v(int64(q.Round))
			v(int64(q.Status))
			v(q.N)
			v(b2i(q.Existed))
			v(q.Counter)
			if q.Recs != nil {
				for _, f := range q.Recs {
					v(f.Exp)
					v(f.M)
					v(f.V)
				}
			}
		}
	}
	for _, g := range s.Grants {
		v(g.Began)
		v(int64(g.Client))
		v(int64(g.Value))
		v(g.Token)
		v(g.At)
		v(g.End)
	}
	v(int64(s.NextRun))
	v(int64(s.NextVal))
	for _, f := range s.Faults {
		v(int64(f))
	}
	return maphash.Bytes(seed, b)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
