package model

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
)

// ClientSpec is one client's configuration.
type ClientSpec struct {
	Mode     byte  // guard: '1', 'p' or '0'
	MaxTTL   int64 // WithMaxTTL; 0: Config.MaxTTL
	TTL      int64 // the lock's TTL; 0: Config.TTL
	Acquires int   // attempts to make
	Refresh  int   // refreshes per held lock
	Release  bool  // release a held lock (else let it expire)
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
	FenceTTL    int64 // counter expiry; 0: 100 x MaxTTL
	Horizon     int64 // real time bound
	Offsets     []int64
	// Second is the node time of a second, for uptime_in_seconds.
	Second int64

	// Faults: how many of each, per schedule.
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

	// Global says whether properties (a) and (b) are asserted: only under
	// the documented assumptions (guard on for all, one max TTL, offsets
	// and faults in bounds).
	Global bool
	Mut    Mutations
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
	}
	if c.FenceTTL == 0 {
		c.FenceTTL = 100 * c.MaxTTL
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

// Msg is a request or a reply on one connection.
type Msg struct {
	Kind  int
	Round int   // the client's round it belongs to
	Value int   // owner value
	Arg   int64 // ttl, or token
	// Reply fields.
	Status int
	N      int64
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
	Token      int64
	Grant      int // index in State.Grants, -1 none
}

// Grant is a lock handed to the caller.
type Grant struct {
	Client int
	Value  int
	Token  int64
	At     int64 // real time of the grant
	End    int64 // real end of validity (validUntil, or the release)
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
			Votes: make([]int8, c.Nodes), Tokens: make([]int64, c.Nodes), FirstYes: make([]bool, c.Nodes)})
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
	}
	t.Conns = slices.Clone(s.Conns)
	for i := range t.Conns {
		t.Conns[i].Req, t.Conns[i].Rep = slices.Clone(s.Conns[i].Req), slices.Clone(s.Conns[i].Rep)
	}
	t.Grants = slices.Clone(s.Grants)
	return &t
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
		cl := &s.Clients[ci]
		for ni := range c.Nodes {
			if len(s.Conns[ci*c.Nodes+ni].Rep) > 0 && (m.countsDecided(cl) || !m.clientCan(s, ci)) {
				return []Step{{Kind: StepDeliver, Client: ci, Node: ni}}
			}
		}
	}
	for ci := range s.Clients {
		if m.clientCan(s, ci) {
			out = append(out, Step{Kind: StepClient, Client: ci})
		}
		if s.Clients[ci].Phase != Done {
			busy = true
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
	if s.T < c.Horizon {
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
		return true // start an attempt, or finish
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

func (m *Model) decidable(s *State, ci int) bool {
	c := &s.Clients[ci]
	yes, pending := m.counts(c)
	q := m.Cfg.Quorum()
	return yes >= q || yes+pending < q || s.T >= c.Start+m.Cfg.NodeTimeout
}

// countsDecided: the round's loop has stopped reading replies.
func (m *Model) countsDecided(c *Client) bool {
	yes, pending := m.counts(c)
	q := m.Cfg.Quorum()
	return yes >= q || yes+pending < q
}

func (s *State) send(nodes, ci int, msg Msg) {
	for ni := range nodes {
		cn := &s.Conns[ci*nodes+ni]
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
	case StepProcess:
		return m.process(s, st.Client, st.Node)
	case StepDeliver:
		m.deliver(s, st.Client, st.Node)
	case StepClient:
		return m.clientStep(s, st.Client)
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

func (m *Model) process(s *State, ci, ni int) *Violation {
	c := &m.Cfg
	cs := c.Clients[ci]
	cn := &s.Conns[ci*c.Nodes+ni]
	req := cn.Req[0]
	cn.Req = cn.Req[1:]
	n := &s.Nodes[ni]
	env := n.env(s.T, c.Second)
	g := m.guard(ci)
	rep := Msg{Kind: req.Kind, Round: req.Round, Value: req.Value}
	voted := false
	switch req.Kind {
	case ReqAcquire:
		rep.Status, rep.N = n.Data.Acquire(env, req.Value, req.Arg, g, c.Mut)
		voted = rep.Status == Taken
	case ReqFence:
		n.Data.Raise(env, req.Arg, g)
		rep.Status = 1
	case ReqRefresh:
		rep.Status = n.Data.Refresh(env, req.Value, req.Arg, g, c.Mut)
		voted = rep.Status == Reseeded
	case ReqRelease:
		if deleted, _ := n.Data.Release(env, req.Value, true); deleted {
			rep.Status = 1
		}
	}
	cn.Rep = append(cn.Rep, rep)
	// (e) recovery: a guarded node votes only maxTTL after it may have
	// lost writes (a 'p' client trusts a restart that kept the data).
	if voted && cs.Mode != '0' && n.Lost && env.Now < n.LostAt+cs.MaxTTL && !(cs.Mode == 'p' && n.LostKept) {
		return &Violation{"recovery", fmt.Sprintf("n%d votes for c%d at node time %d, %d after its fault (max TTL %d)",
			ni+1, ci, env.Now, env.Now-n.LostAt, cs.MaxTTL)}
	}
	return nil
}

func (m *Model) deliver(s *State, ci, ni int) {
	c := &m.Cfg
	cn := &s.Conns[ci*c.Nodes+ni]
	rep := cn.Rep[0]
	cn.Rep = cn.Rep[1:]
	cl := &s.Clients[ci]
	if rep.Round != cl.Round || cl.Votes[ni] != Pending || m.countsDecided(cl) {
		return // late: cannot create a grant
	}
	switch {
	case cl.Phase == Acquiring && rep.Kind == ReqAcquire:
		if rep.Status == Taken {
			cl.Votes[ni], cl.Tokens[ni] = Yes, rep.N
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Fencing && rep.Kind == ReqFence:
		if cl.FirstYes[ni] || c.Mut.FenceCountsAnyNode {
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
	q := c.Quorum()
	switch cl.Phase {
	case Idle:
		if cl.AcqLeft == 0 {
			cl.Phase = Done
			return nil
		}
		cl.AcqLeft--
		// Values per client and attempt, so that equal states hash equal
		// whatever order the clients started in.
		cl.Value = (ci+1)*64 + cs.Acquires - cl.AcqLeft
		m.newRound(s, ci)
		cl.ValidUntil = s.T + cs.TTL - c.Drift
		for i := range cl.Tokens {
			cl.Tokens[i] = 0
		}
		cl.Phase = Acquiring
		s.send(c.Nodes, ci, Msg{Kind: ReqAcquire, Round: cl.Round, Value: cl.Value, Arg: cs.TTL})
	case Acquiring:
		yes, _ := m.counts(cl)
		if yes < q || s.T >= cl.ValidUntil {
			cl.Phase = Idle
			return nil
		}
		cl.Token = 0
		for i, v := range cl.Votes {
			cl.FirstYes[i] = v == Yes
			if v == Yes && cl.Tokens[i] > cl.Token {
				cl.Token = cl.Tokens[i]
			}
		}
		equal := 0
		for i, v := range cl.Votes {
			if v == Yes && cl.Tokens[i] == cl.Token {
				equal++
			}
		}
		if equal >= q || c.Mut.NoSecondRound {
			return m.grant(s, ci)
		}
		cl.Phase = Won
	case Won:
		m.newRound(s, ci)
		cl.Phase = Fencing
		s.send(c.Nodes, ci, Msg{Kind: ReqFence, Round: cl.Round, Value: cl.Value, Arg: cl.Token})
	case Fencing:
		yes, _ := m.counts(cl)
		if yes < q || s.T >= cl.ValidUntil {
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
			s.send(c.Nodes, ci, Msg{Kind: ReqRefresh, Round: cl.Round, Value: cl.Value, Arg: cs.TTL})
		default:
			if cs.Release {
				g.End = min(g.End, s.T)
				s.send(c.Nodes, ci, Msg{Kind: ReqRelease, Round: cl.Round, Value: cl.Value})
			}
			cl.Phase = Idle
		}
	case Refreshing:
		yes, _ := m.counts(cl)
		g := &s.Grants[cl.Grant]
		if yes >= q && s.T < cl.ValidUntil && s.T < cl.NewValid {
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

// refreshQuorum checks (c): a quorum of this round's replies agreed.
func (m *Model) refreshQuorum(s *State, ci int) *Violation {
	cl := &s.Clients[ci]
	if yes, _ := m.counts(cl); yes < m.Cfg.Quorum() {
		return &Violation{"refresh", fmt.Sprintf("c%d extended its lock with %d yes-votes", ci, yes)}
	}
	return nil
}

// grant hands the lock to client ci and checks (a) and (b).
func (m *Model) grant(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	cl.Phase = Holding
	cl.RefLeft = c.Clients[ci].Refresh
	s.Grants = append(s.Grants, Grant{Client: ci, Value: cl.Value, Token: cl.Token, At: s.T, End: cl.ValidUntil})
	cl.Grant = len(s.Grants) - 1
	if v := m.exclusive(s, ci); v != nil {
		return v
	}
	if !c.Global {
		return nil
	}
	g := s.Grants[cl.Grant]
	for _, e := range s.Grants[:cl.Grant] {
		if e.Token >= g.Token {
			return &Violation{"token", fmt.Sprintf("c%d granted token %d at t=%d after c%d got token %d at t=%d",
				ci, g.Token, g.At, e.Client, e.Token, e.At)}
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
	for _, e := range s.Grants {
		if e.Value != g.Value && e.At <= s.T && s.T < e.End {
			return &Violation{"exclusion", fmt.Sprintf("c%d holds the lock at t=%d while c%d's grant of t=%d is valid until %d",
				ci, s.T, e.Client, e.At, e.End)}
		}
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
		for i := range c.Votes {
			v(int64(c.Votes[i]))
			v(c.Tokens[i])
			v(b2i(c.FirstYes[i]))
		}
	}
	for _, cn := range s.Conns {
		v(int64(len(cn.Req)))
		for _, q := range cn.Req {
			v(int64(q.Kind))
			v(int64(q.Round))
			v(int64(q.Value))
			v(q.Arg)
		}
		v(int64(len(cn.Rep)))
		for _, q := range cn.Rep {
			v(int64(q.Kind))
			v(int64(q.Round))
			v(int64(q.Status))
			v(q.N)
		}
	}
	for _, g := range s.Grants {
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
