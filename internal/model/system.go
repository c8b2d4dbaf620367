package model

import (
	"math/rand/v2"
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
	// Conf is the client's node configuration during the moves from
	// Config.SetA to SetB and SetB to SetC (joint.go): 0 every node
	// (no records), ConfA, ConfB or ConfC a set alone, ConfJoint or
	// ConfJointBC a move's joint configuration.
	Conf    byte
	Refresh int  // refreshes per held lock
	Release bool // release a held lock (else let it expire)
	// Handoff: a held lock is handed off (Lock.Handoff) where it would be
	// released, and its form goes to the clients that resume this one's.
	Handoff bool
	// Resume is 1 + the index of the client whose forms this one resumes
	// (Client.Resume), each once; its kind, owner and TTL are that
	// client's. A client that resumes makes no acquires. Two clients that
	// resume one client's forms are a form delivered twice.
	Resume int
	// Forged: the forms this client resumes are edited to another kind
	// (forged).
	Forged bool
	// Twice: each form is delivered to this client twice, and resumed
	// again once the first Resume has ended.
	Twice bool
	// KeepAlive: the client refreshes a held lock as the keep-alive does
	// (WithAutoRefresh), a TTL/3 after the round before, not at once;
	// it may still be paused past that.
	KeepAlive bool
	// Spelling is how the client writes its nodes' addresses (identity.go):
	// 1 is one server reached under another address.
	Spelling byte
	// Forgotten: a client of A alone that the operator does not know of,
	// known to the runbook only through the doctor (runbook.go).
	Forgotten bool
	// Linger: a joint client stays open after its attempts until step 3
	// of its move has begun (runbook.go).
	Linger bool
	// After is the real time before which the client makes no attempt (a
	// targeted search).
	After int64
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
	// SnapRestarts: restarts from an older snapshot (StepSnapshot takes
	// one, of the node's whole data set).
	SnapRestarts int
	// Dups: requests run twice on their node (a retry after a lost
	// reply), the second time at any later point of the connection.
	Dups int
	// EarlyStarts: clients an operator starts before step 2 of their move
	// is over (runbook.go).
	EarlyStarts int
	// Repoints: addresses re-pointed (identity.go, StepRepoint): the
	// requests of a client, or of every client that spells the address
	// one way, to a node reach another node of its set from then on (a
	// DNS name or a proxy pointed elsewhere after the first contact),
	// until it is pointed back. Only the random schedules inject them.
	Repoints int
}

// Indexes of State.Faults, the faults a schedule has used.
const (
	faultRestart = iota
	faultDataRestart
	faultPromote
	faultSnapRestart
	faultDup
	faultEarly
	faultRepoint
	nFaults
)

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
	// shorter than the spread of the clock offsets and a second (a seed
	// is rounded down to the second; fill checks).
	FenceTTL int64
	Horizon  int64 // real time bound
	Offsets  []int64
	// Second is the node time of a second, for uptime_in_seconds and
	// the counters' seeds (rounded down to the second).
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
	// NodeSets are the node sets of the moves, for clients with a Conf.
	NodeSets
	Mut Mutations
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
		if cs.Resume > 0 {
			src := c.Clients[cs.Resume-1]
			cs.Kind, cs.Owner, cs.TTL, cs.Acquires = src.Kind, src.Owner, src.TTL, 0
			if src.TTL == 0 {
				cs.TTL = c.TTL
			}
		}
		if c.Global && cs.Mode == 'p' && c.SnapRestarts > 0 {
			panic("model: a client trusting persistence beside restarts from older snapshots, outside its assumption")
		}
	}
	if c.FenceTTL == 0 {
		c.FenceTTL = c.MaxTTL
	}
	lo, hi := int64(0), int64(0)
	for _, o := range append(slices.Clone(c.Offsets), c.ReplicaOffsets...) {
		lo, hi = min(lo, o), max(hi, o)
	}
	if c.Second == 0 {
		c.Second = 1
	}
	// A seed is rounded down to the second: Lemma 1's margin loses up to
	// a second less a tick.
	if c.Global && c.FenceTTL < hi-lo+c.Second-1 {
		panic("model: FenceTTL below the spread of the clock offsets and a second, outside Lemma 1's assumption")
	}
	if c.Nodes > maxNodes || len(c.Clients) > maxClients {
		panic("model: more nodes than maxNodes, or clients than maxClients")
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
	ReqRecord // record.lua (joint_records.go)
	ReqClaim  // resume.lua (handoff.go)
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
	Owner int       // a resumed hold's owner (the form's); 0: the client's own
	Claim *Form     // a claim's form (its secret the one to claim; Value the new one)
	// Reply fields.
	Status  int
	N       int64
	Existed bool        // family acquire: the owner's lock was there
	Counter int64       // family acquire: the node's counter
	Recs    *ConfFields // record: the node's configuration record
	RecNow  int64       // an acquire's folded record: the node's time (foldRecords)
	// Node is the identity the client learned for the node it addressed
	// (the guard's, script.Guard.Node; identity.go): 0 for none, before
	// its first contact. A vote is refused on a node of another identity
	// (OtherNode).
	Node int
	// ID is an acquire reply's identity of the server that ran it, read
	// after the script in its pipeline (the library's
	// script.Call.AcquireIdentified) for a client that reads identities
	// with its acquires (Model.folds) and had none for the node; 0 else.
	ID int
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
	Snap      Data // its last snapshot (an RDB file), taken at SnapAt (0: none)
	SnapAt    int64
	// LostAt (node time) is the last restart or promotion; LostKept says
	// it kept the data (a restart with persistence).
	LostAt   int64
	Lost     bool
	LostKept bool
	LostReal int64 // real time of that fault
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
	Checking // an attempt waits for its record round (joint_records.go)
	Claiming // a resume's claim round (handoff.go)
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
	Ballot     // the round's votes
	Token      int64
	Grant      int      // index in State.Grants, -1 none
	Rec        Recorder // configuration records (joint_records.go)
	Life                // names, runbook and forms
}

// Ballot are the votes of a client's round, per node.
type Ballot struct {
	Votes    []int8
	Tokens   []int64 // a vote's token; a claim's time left
	FirstYes []bool
	Existed  []bool  // family: the vote found the owner's lock
	Counters []int64 // family: the node's counter with its vote
}

// Life is what a client is in the runbook and the handoffs.
type Life struct {
	Names   Names // its node sets' names, from its first contact (identity.go)
	Started bool  // it made its first attempt
	Early   bool  // the operator started it before its gate (runbook.go)
	// Form is 1 + the index in State.Forms of the form its current lock
	// was resumed from (0: none), and Held the form as it read it.
	Form int
	Held Form
	// Forms counts the forms of its source it has taken up.
	Forms int
	// Saw are the clients (bits) whose evidence its last attempt's
	// record showed beside a move linking them to its sets.
	Saw uint64
	// IDs are the identities it learned for its nodes (0: none), at its
	// first contact and when it identified a node again; Unknown are the
	// nodes (bits) that refused a vote as another node, to identify again
	// before its next attempt; Invalid: it found two of its nodes of one
	// identity, and refuses its node set (ErrInvalid). identity.go.
	IDs     [maxNodes]int
	Unknown uint64
	Invalid bool
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
	// Origin is 1 + the index of the grant a resumed lock continues (the
	// handed lock's); 0: none.
	Origin int
	// Saw are the clients whose evidence the records of the attempt
	// showed (Life.Saw).
	Saw uint64
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
	NextID  int // the next node identity (identity.go)
	Faults  [nFaults]int
	Forms   []FormRec // handoff forms (handoff.go)
	// Gates caches whether each step 2 is over (runbook.go) in this
	// state: 0 not known yet, 1 over, 2 not. Apply forgets it.
	Gates [3]int8
	// Docs caches the doctor's readings of each move, valid while the
	// records, identities and nodes (Version) and the time are those it
	// read.
	Docs    [3]docCache
	Version int
	// Opened is when each step 2 was first seen over (0: not yet), for
	// the searches' reports (Model.Observe).
	Opened [3]int64
	// Route is where each address leads, by connection (client) and
	// node: 1 + the node its requests reach, 0 its own (StepRepoint,
	// identity.go).
	Route [maxClients][maxNodes]int8
}

// docCache is a doctor's reading and when it was made.
type docCache struct {
	t, version int64
	step       int
	ok         bool
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
	StepRecord      // a client's recorder (joint_records.go)
	StepSnapshot    // a node writes a snapshot of its data set
	StepSnapRestart // a node restarts from its last snapshot
	StepDup         // the request at a connection's head will run twice
	StepEarly       // the operator starts a client early (runbook.go)
	StepRepoint     // an address is re-pointed, or pointed back (identity.go)
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
	// Observe, when set, is shown the last state of every schedule that
	// Random plays to its end (to measure what the schedules reach).
	Observe func(*State)
	// Swarm makes each schedule of Random inject a subset of the faults
	// of the configuration, drawn at its start (swarm testing).
	Swarm bool
	// Check, when set, is a property more that every step checks (a
	// test's probe).
	Check func(*State) *Violation
	// Only, when set, is the one property whose violation is a find (a
	// search for a finding's own symptom: B's, a token below another
	// holder's, not A's two holders): a violation of any other property
	// is passed over, and the schedule goes on (Model.finds).
	Only string
	// Aim, when set, makes each schedule of Random a targeted one: called
	// with the schedule's generator at its start, it returns the filter
	// of the steps its strategy may choose from (where it leaves none,
	// the schedule ends). The steps stay the model's: only the choice
	// among them is aimed.
	Aim func(rng *rand.Rand) func(s *State, en []Step) []Step
	// aliases are the sets' fingerprints by address (identity.go), made
	// once.
	aliases map[aliasKey]string
}

// New returns a model of cfg.
func New(cfg Config) *Model {
	cfg.fill()
	m := &Model{Cfg: cfg, aliases: map[aliasKey]string{}}
	for _, set := range []uint64{cfg.SetA, cfg.SetB, cfg.SetC, 1<<cfg.Nodes - 1} {
		for _, sp := range []byte{0, 1} {
			m.aliases[aliasKey{set, sp}] = m.makeAlias(set, sp)
		}
	}
	return m
}

// Init is the initial state: nodes up for a while, empty, no record.
func (m *Model) Init() *State {
	c := &m.Cfg
	s := &State{T: 10 * c.Second, NextRun: c.Nodes + 1, NextVal: 1, NextID: c.Nodes + 1}
	for i := range c.Nodes {
		s.Nodes = append(s.Nodes, Node{Offset: c.Offsets[i], Run: i + 1, Start: -100 * c.Second, Data: Data{ID: i + 1}, Copy: Data{ID: i + 1}})
	}
	for _, cs := range c.Clients {
		s.Clients = append(s.Clients, Client{AcqLeft: cs.Acquires, Grant: -1, Ballot: Ballot{
			Votes: make([]int8, c.Nodes), Tokens: make([]int64, c.Nodes), FirstYes: make([]bool, c.Nodes),
			Existed: make([]bool, c.Nodes), Counters: make([]int64, c.Nodes)}})
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
	t.Forms = slices.Clone(s.Forms)
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
