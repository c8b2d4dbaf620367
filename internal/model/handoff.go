package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Handing a held lock to another process (docs/handoff.md): Lock.Handoff
// ends a lock in the handing Client without releasing it and returns its
// form (name, kind, token, TTL and secret); Client.Resume claims it on the
// nodes (resume.lua, Data.Claim below) and returns it to the worker.
//
// The handoff model is a small system of its own beside system.go's: the
// nodes' data and scripts are the same (node.go, family.go, permit.go),
// and its actors are the handing Client H, which holds the lock from the
// start, may send refreshes (whose requests may run at any later time:
// the late replies of the last refreshes) and hands the lock off; two
// workers W1 and W2 that each resume the form (a form delivered twice), the
// second of which may resume a form edited to another kind; and a rival
// Client C that obtains the name and releases it. Requests and replies
// travel on FIFO connections, one per actor and node, that the explorer
// delays at will; time advances by ticks; keys and holds expire. Clocks
// agree (the drift allowance is a constant): what the model checks is who
// holds what, not clock skew, which system.go covers.
//
// Fencing tokens are modelled as far as the claim's check needs them: the
// nodes' counters start at H's token (1: H's acquire at t=0 issued it
// everywhere), the rival's acquires issue tokens from them as acquire.lua,
// family.lua and permit.lua do (its token is the highest yes-vote; the
// second round is not modelled), the form carries H's token, and a
// resumed lock must not follow a conflicting grant of a higher token (H's
// late refreshes re-created the lock after the rival's tenure).
//
// Not modelled: refreshes of the resumed lock, restarts and failovers,
// joint configurations, the counters' expiry (FenceTTL is beyond the
// horizon).

// Claim statuses, as resume.lua replies.
const (
	NotClaimed      = 0
	Claimed         = 1
	ClaimRecovering = 2 // the restart guard: the node may not vote yet
	AlreadyClaimed  = 3
	Superseded      = 4  // the counter is missing or above the form's token
	ClaimKindError  = -1 // REDLOCK_KIND (an error reply): the node holds the secret in another kind
)

// Tomb is resume.lua's tombstone <lock>:claimed:<secret>: a claim of
// Secret ran on the node; the key exists while now <= Exp.
type Tomb struct {
	Secret int
	Exp    int64
}

// Tombs are a node's tombstones (a fixed array, so that states compare
// and hash by value).
type Tombs [2]Tomb

// has reports whether a tombstone of secret exists at now.
func (t *Tombs) has(secret int, now int64) bool {
	for _, x := range t {
		if x.Secret == secret && now <= x.Exp {
			return true
		}
	}
	return false
}

// set is SET <lock>:claimed:<secret> 1 PX ttl.
func (t *Tombs) set(secret int, exp int64) {
	for i, x := range t {
		if x.Secret == secret {
			t[i].Exp = exp
			return
		}
	}
	for i, x := range t {
		if x.Secret == 0 {
			t[i] = Tomb{secret, exp}
			return
		}
	}
	panic("model: more tombstones than Tombs holds")
}

// Form is what a handoff form says of its lock: its kind ('p' a plain
// lock, 'w' an exclusive hold of the family, 'r' a reader's hold, 's' a
// permit), the exclusive owner (for 'w'), the semaphore's number of
// permits (for 's'), the secret (the plain lock's value, or the hold's
// ID) and the fencing token.
type Form struct {
	Kind   byte
	Owner  int
	K      int
	Secret int
	Token  int64
}

// Claim is resume.lua on a node's data and tombstones at env, for a
// request with the guard g: where the node holds f's secret in f's kind,
// the secret becomes new, with the same expiry, and a tombstone of the old
// secret is left for g.FenceTTL. It returns the status and, when Claimed,
// how long the claimed lock has left. A node that recovers (the restart
// guard, Epoch) answers ClaimRecovering with the time left to recover, and
// changes nothing but its epoch record.
// Where the node's fencing counter is missing or, raised to the epoch's
// floor, above f's token (a holder granted after f's lock can have drawn
// a token here), it answers Superseded and changes nothing; not for a
// permit of a semaphore of more than one. The mutations ClaimTrustsKind,
// NoTombstone, NoCounterCheck, ClaimUnguarded and ClaimRawCounter switch
// its checks off.
func (d *Data) Claim(t *Tombs, env Env, f Form, new int, g Guard, mut HandoffMutations) (status int, left int64) {
	d.expire(env)
	now := env.Now
	rec, floor := d.Epoch(env, g, Mutations{})
	if rec > 0 && !mut.ClaimUnguarded {
		return ClaimRecovering, rec
	}
	checkKind, tomb := !mut.ClaimTrustsKind, !mut.NoTombstone
	if tomb && t.has(f.Secret, now) {
		return AlreadyClaimed, 0
	}
	// resume.lua's later(): the counter missing (expire cleared an
	// expired one), or above the token once raised to the epoch's floor.
	later := func() bool {
		if mut.NoCounterCheck || (f.Kind == 's' && f.K != 1) {
			return false
		}
		if !d.Fence.OK {
			return true
		}
		v := d.Fence.V
		if !mut.ClaimRawCounter {
			v = max(v, floor)
		}
		return v > f.Token
	}
	if d.Lock.Owner != 0 { // a string
		if d.Lock.Owner != f.Secret {
			return NotClaimed, 0
		}
		if f.Kind != 'p' && checkKind {
			return ClaimKindError, 0
		}
		pttl := d.Lock.Exp - now
		if pttl <= 0 {
			return NotClaimed, 0
		}
		if later() {
			return Superseded, 0
		}
		d.Lock.Owner = new
		if tomb {
			t.set(f.Secret, now+g.FenceTTL)
		}
		return Claimed, pttl
	}
	if !d.live(now) {
		return NotClaimed, 0
	}
	fam := &d.Fam
	exp, ok := fam.Hold(f.Secret)
	if !ok {
		return NotClaimed, 0
	}
	if checkKind && (f.Kind == 'p' || fam.Mode != f.Kind || (f.Kind == 'w' && fam.Owner != f.Owner) || (f.Kind == 's' && fam.K != f.K)) {
		return ClaimKindError, 0
	}
	if later() {
		return Superseded, 0
	}
	fam.delHold(f.Secret)
	fam.setHold(new, exp)
	if tomb {
		t.set(f.Secret, now+g.FenceTTL)
	}
	return Claimed, exp - now
}

// OldResumeCheck is the read of the resume before issue 33 (the
// OldResume mutant): GET and PTTL for a plain lock's form, HGET h:ID and
// TIME for a hold's, whatever the node's mode, owner or number of
// permits; nothing is written.
func (d *Data) OldResumeCheck(env Env, f Form) (ok bool, left int64) {
	d.expire(env)
	now := env.Now
	if f.Kind == 'p' {
		if d.Lock.Owner == f.Secret && d.Lock.Exp-now > 0 {
			return true, d.Lock.Exp - now
		}
		return false, 0
	}
	if d.Lock.Owner != 0 || !d.Fam.OK {
		return false, 0
	}
	if exp, ok := d.Fam.Hold(f.Secret); ok && exp > now {
		return true, exp - now
	}
	return false, 0
}

// HandoffMutations switch Resume back to broken versions.
type HandoffMutations struct {
	// OldResume is Resume before issue 33: it reads whether a quorum holds
	// the form's secret (OldResumeCheck), writes nothing, and returns the
	// lock with the form's secret and kind (findings 2 and 3).
	OldResume bool
	// ClaimTrustsKind: the claim rotates the secret without checking the
	// hold's mode, owner or number of permits (finding 3).
	ClaimTrustsKind bool
	// NoTombstone: the claim leaves no tombstone, and a late refresh of
	// the handing Client can write the old secret back for a second
	// Resume to claim.
	NoTombstone bool
	// ValidityFromDecision: the resumed lock's validity is counted from
	// the claim round's decision, not from before its requests were sent.
	ValidityFromDecision bool
	// NoCounterCheck: the claim does not read the fencing counter, so a
	// form whose lock H's late refreshes re-created after the rival's
	// tenure resumes with a token below the rival's.
	NoCounterCheck bool
	// ClaimUnguarded: the claim ignores the restart guard (resume.lua
	// before issue 44's finding A): a node that restarted from a
	// snapshot, or a promoted replica, gives a claim its vote while it
	// recovers.
	// The handoff model has no restarts; TestClaimModelTellsBrokenTwins
	// shows that the differential test tells this twin from the script.
	ClaimUnguarded bool
	// ClaimRawCounter: the claim compares the form's token with the
	// counter as it is, not raised to the epoch's floor (resume.lua before
	// issue 44's finding B): a counter restored from a snapshot, or
	// replicated to a promoted replica, that lacks a later holder's token
	// passes. Not in the handoff model either (no restarts).
	ClaimRawCounter bool
}

// HandoffConfig bounds a handoff model.
type HandoffConfig struct {
	Nodes int
	// Kind is the handed lock's: Plain, Reentrant, Exclusive, Shared or
	// Permit (system.go's client kinds).
	Kind    byte
	Permits int // a Permit's semaphore's k
	TTL     int64
	// Drift is the validity set aside for clock drift (a constant here).
	Drift       int64
	NodeTimeout int64
	TombTTL     int64 // the tombstones' expiry (the real one: FenceTTL)
	Horizon     int64
	Refreshes   int  // refreshes H may send before it hands off
	Forged      bool // W2's form is edited to another kind (ForgedForm)
	Rival       int  // obtains the rival C may try (0: no rival)
	// Late: the workers resume, and the rival tries, only from t = Late
	// on (0: at any time). A targeted search: the premise of the fencing
	// check's schedule, a Resume and a rival that come after the handed
	// lock expired, which random schedules from the start rarely meet.
	Late int64
	Mut  HandoffMutations
}

// Handoff actors.
const (
	ActH = iota // the handing Client
	ActW1
	ActW2
	ActC // the rival
	nActors
)

// Handoff request kinds.
const (
	hReqClaim = iota + 1
	hReqRefresh
	hReqAcquire
	hReqRelease
)

// hMsg is a request or its reply on one connection.
type hMsg struct {
	Kind   int
	Round  int
	Form   Form // the lock the request is about (its secret: the value sent)
	New    int  // a claim's new secret
	Status int  // reply: the claim's status, or 1 for a yes of another request
	Left   int64
}

// hConn is one actor's connection to one node.
type hConn struct{ Req, Rep []hMsg }

// hActor is one actor's state.
type hActor struct {
	Phase      int // Idle, Acquiring (a claim or an acquire round), Holding, Done
	Left       int // H: refreshes left; C: obtains left
	Round      int
	Start      int64
	Votes      [5]int8
	Lefts      [5]int64
	Lock       Form // the lock it holds or claims (its current secret)
	ValidUntil int64
	Grant      int // index in HState.Grants, -1 none
}

// HGrant is a lock held by an actor, from At until End (its validity,
// or the start of its release; H's ends at its handoff).
type HGrant struct {
	Actor   int
	Kind    byte // as the holder's Lock reports it
	Owner   int  // a reentrant owner, who shares the lock with itself
	At, End int64
	Resumed bool
	Token   int64 // its fencing token
}

// HState is the handoff system's state.
type HState struct {
	T       int64
	Nodes   []Data
	Tombs   []Tombs
	Actors  [nActors]hActor
	Conns   []hConn // actor*Nodes + node
	Handed  bool
	Grants  []HGrant
	Resumes int // successful resumes of the form
}

// HandoffModel is a configured handoff model.
type HandoffModel struct{ Cfg HandoffConfig }

// NewHandoff returns a handoff model of cfg.
func NewHandoff(cfg HandoffConfig) *HandoffModel {
	if cfg.Nodes > 5 {
		panic("model: a handoff model has at most 5 nodes")
	}
	if cfg.TombTTL == 0 {
		cfg.TombTTL = 10 * cfg.Horizon
	}
	if cfg.Permits == 0 {
		cfg.Permits = 1
	}
	return &HandoffModel{Cfg: cfg}
}

// The actors' secrets: H's lock, each worker's new secret, the rival's.
const (
	secretH  = 1
	secretW1 = 2
	secretW2 = 3
	secretC  = 4
)

// handed is the form of H's lock.
func (m *HandoffModel) handed() Form {
	f := Form{Kind: 'p', Secret: secretH, Token: tokenH}
	switch m.Cfg.Kind {
	case Reentrant:
		f.Kind, f.Owner = 'w', 1
	case Exclusive:
		f.Kind, f.Owner = 'w', 1<<20+secretH
	case Shared:
		f.Kind = 'r'
	case Permit:
		f.Kind, f.K = 's', m.Cfg.Permits
	}
	return f
}

// tokenH is H's fencing token: its acquire at t=0 issued it on every node.
const tokenH = 1

// ForgedForm is the handed form edited to another kind that agrees with
// itself, as finding 3's reviewer did: a reader's that says writer, a
// writer's that says reader, a plain lock's that says reader, a reentrant
// lock's of another owner, a permit's of another number of permits.
func (m *HandoffModel) ForgedForm() Form {
	f := m.handed()
	switch f.Kind {
	case 'r':
		f.Kind, f.Owner = 'w', 1<<20+9
	case 'w':
		if m.Cfg.Kind == Reentrant {
			f.Owner = 2
		} else {
			f.Kind, f.Owner = 'r', 0
		}
	case 's':
		f.K++
	default:
		f.Kind = 'r'
	}
	return f
}

// rival is C's lock: a lock of the handed kind that the handed lock keeps
// out (another reentrant owner), or a reader beside a reader's.
func (m *HandoffModel) rival() Form {
	f := m.handed()
	f.Secret = secretC
	switch m.Cfg.Kind {
	case Reentrant:
		f.Owner = 2
	case Exclusive:
		f.Owner = 1<<20 + secretC
	}
	return f
}

// Init is the initial state: H holds the lock on every node, taken at
// t=0 with the TTL, valid until TTL - Drift.
func (m *HandoffModel) Init() *HState {
	c := &m.Cfg
	s := &HState{Nodes: make([]Data, c.Nodes), Tombs: make([]Tombs, c.Nodes), Conns: make([]hConn, nActors*c.Nodes)}
	f := m.handed()
	for i := range s.Nodes {
		d := &s.Nodes[i]
		// H's acquire at t=0 issued its token on every node (a missing
		// counter reads as 0 x 1024 then), with run's FenceTTL.
		d.Fence = Counter{OK: true, V: f.Token, Exp: 10 * c.Horizon}
		if f.Kind == 'p' {
			d.Lock = Key{Owner: f.Secret, Exp: c.TTL}
			continue
		}
		d.Fam = Family{OK: true, Mode: f.Kind, Owner: f.Owner, Exp: c.TTL}
		if f.Kind == 's' {
			d.Fam.K = f.K
		}
		if f.Kind == 'w' {
			d.Fam.T = 1
		}
		d.Fam.setHold(f.Secret, c.TTL)
	}
	for i := range s.Actors {
		s.Actors[i].Grant = -1
	}
	h := &s.Actors[ActH]
	h.Phase, h.Left, h.Lock, h.ValidUntil = Holding, c.Refreshes, f, c.TTL-c.Drift
	s.Grants = append(s.Grants, m.grantOf(ActH, f, 0, h.ValidUntil, false, f.Token))
	h.Grant = 0
	w2 := f
	if c.Forged {
		w2 = m.ForgedForm()
	}
	s.Actors[ActW1].Lock, s.Actors[ActW2].Lock = f, w2
	if c.Rival > 0 {
		s.Actors[ActC].Lock, s.Actors[ActC].Left = m.rival(), c.Rival
	} else {
		s.Actors[ActC].Phase = Done
	}
	return s
}

func (m *HandoffModel) grantOf(actor int, f Form, at, end int64, resumed bool, token int64) HGrant {
	g := HGrant{Actor: actor, Kind: f.Kind, At: at, End: end, Resumed: resumed, Token: token}
	if f.Kind == 'w' && f.Owner < 1<<20 {
		g.Owner = f.Owner
	}
	return g
}

// conflicts reports whether two grants exclude each other: readers share,
// so do the permits of a semaphore of more than one, and a reentrant
// owner's holds; any other two holders exclude each other.
func (m *HandoffModel) conflicts(a, b HGrant) bool {
	switch {
	case a.Kind == 'r' && b.Kind == 'r':
		return false
	case a.Kind == 's' && b.Kind == 's' && m.Cfg.Permits > 1:
		return false
	case a.Owner != 0 && a.Owner == b.Owner:
		return false
	}
	return true
}

// Clone deep-copies s.
func (s *HState) Clone() *HState {
	t := *s
	t.Nodes = slices.Clone(s.Nodes)
	t.Tombs = slices.Clone(s.Tombs)
	t.Conns = slices.Clone(s.Conns)
	for i := range t.Conns {
		t.Conns[i].Req, t.Conns[i].Rep = slices.Clone(s.Conns[i].Req), slices.Clone(s.Conns[i].Rep)
	}
	t.Grants = slices.Clone(s.Grants)
	return &t
}

// quorum is the number of nodes a lock of the handed kind needs.
func (m *HandoffModel) quorum() int {
	if m.Cfg.Kind == Permit {
		return PermitQuorum(m.Cfg.Nodes, m.Cfg.Permits)
	}
	return m.Cfg.Nodes/2 + 1
}

// Enabled lists the steps possible in s, in a fixed order (Step's Client
// is the actor).
func (m *HandoffModel) Enabled(s *HState) []Step {
	c := &m.Cfg
	var out []Step
	busy := false
	for a := range nActors {
		if m.actorCan(s, a) {
			out = append(out, Step{Kind: StepClient, Client: a})
		}
		if s.Actors[a].Phase != Done && !(a == ActH && s.Handed) {
			busy = true
		}
		for ni := range c.Nodes {
			cn := &s.Conns[a*c.Nodes+ni]
			if len(cn.Req) > 0 {
				out = append(out, Step{Kind: StepProcess, Client: a, Node: ni})
				busy = true
			}
			if len(cn.Rep) > 0 {
				out = append(out, Step{Kind: StepDeliver, Client: a, Node: ni})
			}
		}
	}
	if !busy {
		return nil
	}
	if s.T < c.Horizon {
		out = append(out, Step{Kind: StepTick})
	}
	return out
}

// actorCan reports whether actor a has a local step.
func (m *HandoffModel) actorCan(s *HState, a int) bool {
	ac := &s.Actors[a]
	switch a {
	case ActH:
		// Refresh or hand off, while the lock is held (Lock.check).
		return !s.Handed && s.T < ac.ValidUntil-m.Cfg.NodeTimeout
	case ActW1, ActW2:
		switch ac.Phase {
		case Idle:
			return s.Handed && s.T >= m.Cfg.Late
		case Acquiring:
			return m.decidable(s, a)
		case Holding:
			return true // release
		}
	case ActC:
		switch ac.Phase {
		case Idle:
			return ac.Left > 0 && s.T >= m.Cfg.Late
		case Acquiring:
			return m.decidable(s, a)
		case Holding:
			return true
		}
	}
	return false
}

// decidable: every node answered, the timeout passed, or (the rival's
// acquire, which decides early) a quorum agreed or can no longer agree.
// Resume's claim waits for every node (quorum.WaitAll).
func (m *HandoffModel) decidable(s *HState, a int) bool {
	ac := &s.Actors[a]
	yes, pending := 0, 0
	for ni := range m.Cfg.Nodes {
		switch ac.Votes[ni] {
		case Yes:
			yes++
		case Pending:
			pending++
		}
	}
	if pending == 0 || s.T >= ac.Start+m.Cfg.NodeTimeout {
		return true
	}
	return a == ActC && (yes >= m.quorum() || yes+pending < m.quorum())
}

// send queues a request from actor a to every node, or to the nodes of
// mask.
func (m *HandoffModel) send(s *HState, a int, q hMsg, mask uint64) {
	for ni := range m.Cfg.Nodes {
		if mask&(1<<ni) != 0 {
			cn := &s.Conns[a*m.Cfg.Nodes+ni]
			cn.Req = append(cn.Req, q)
		}
	}
}

func (m *HandoffModel) all() uint64 { return 1<<m.Cfg.Nodes - 1 }

// Apply performs step st on s (a clone) and returns the violation it
// reveals, if any.
func (m *HandoffModel) Apply(s *HState, st Step) *Violation {
	c := &m.Cfg
	switch st.Kind {
	case StepTick:
		s.T++
	case StepProcess:
		cn := &s.Conns[st.Client*c.Nodes+st.Node]
		q := cn.Req[0]
		cn.Req = cn.Req[1:]
		q.Status, q.Left = m.run(s, st.Node, q)
		cn.Rep = append(cn.Rep, q)
	case StepDeliver:
		cn := &s.Conns[st.Client*c.Nodes+st.Node]
		r := cn.Rep[0]
		cn.Rep = cn.Rep[1:]
		ac := &s.Actors[st.Client]
		if ac.Phase == Acquiring && r.Round == ac.Round && (r.Kind == hReqClaim || r.Kind == hReqAcquire) && ac.Votes[st.Node] == Pending {
			if r.Status == Claimed && (r.Left > 0 || r.Kind == hReqAcquire) {
				ac.Votes[st.Node], ac.Lefts[st.Node] = Yes, r.Left
			} else {
				ac.Votes[st.Node] = No
			}
		}
	case StepClient:
		return m.act(s, st.Client)
	}
	return nil
}

// run executes request q on node ni: the script of its kind, for the lock
// q.Form says. A yes is reported as status Claimed.
func (m *HandoffModel) run(s *HState, ni int, q hMsg) (int, int64) {
	c := &m.Cfg
	d := &s.Nodes[ni]
	env := Env{Now: s.T}
	g := Guard{MaxTTL: c.TTL, Mode: '0', FenceTTL: 10 * c.Horizon}
	f := q.Form
	yes := func(ok bool) (int, int64) {
		if ok {
			return Claimed, 0
		}
		return NotClaimed, 0
	}
	switch q.Kind {
	case hReqClaim:
		if c.Mut.OldResume {
			ok, left := d.OldResumeCheck(env, f)
			if ok {
				return Claimed, left
			}
			return NotClaimed, 0
		}
		cg := g
		cg.FenceTTL = c.TombTTL
		return d.Claim(&s.Tombs[ni], env, f, q.New, cg, c.Mut)
	case hReqRefresh:
		switch f.Kind {
		case 'p':
			// H's late refreshes re-seed as a Client before issue 44,
			// whatever the counter (its token above every one), and its
			// releases retire nothing (token 0): the claim's own checks
			// must hold against them (mixed versions).
			r := d.Refresh(env, f.Secret, c.TTL, math.MaxInt64, g, Mutations{})
			return yes(r == Extended || r == Reseeded)
		case 's':
			r := d.PermRefresh(env, f.K, f.Secret, c.TTL, math.MaxInt64, g, Mutations{})
			return yes(r == Extended || r == Reseeded)
		}
		r := d.FamRefresh(env, f.Kind, f.Owner, f.Secret, c.TTL, math.MaxInt64, g, Mutations{})
		return yes(r == Extended || r == Reseeded)
	case hReqAcquire:
		// A yes reports its vote (the token issued) in Left.
		var status int
		var token int64
		switch f.Kind {
		case 'p':
			status, token = d.Acquire(env, f.Secret, c.TTL, g, Mutations{})
		case 's':
			status, token = d.PermAcquire(env, f.K, f.Secret, c.TTL, g, Mutations{})
		default:
			status, token, _, _ = d.FamAcquire(env, f.Kind, f.Owner, f.Secret, c.TTL, g, Mutations{})
		}
		if status != Taken {
			return NotClaimed, 0
		}
		return Claimed, token
	case hReqRelease:
		switch f.Kind {
		case 'p':
			del, _ := d.Release(env, f.Secret, 0, false, g, Mutations{})
			return yes(del)
		case 's':
			del, _, _ := d.PermRelease(env, f.Secret, 0, false, g, Mutations{})
			return yes(del)
		}
		del, _, _ := d.FamRelease(env, f.Kind, f.Owner, f.Secret, 0, false, g, Mutations{})
		return yes(del)
	}
	panic("model: unknown handoff request")
}

// act is actor a's local step.
func (m *HandoffModel) act(s *HState, a int) *Violation {
	ac := &s.Actors[a]
	switch {
	case a == ActH:
		if ac.Left > 0 && !s.Handed {
			// A refresh: its requests run whenever the explorer lets
			// them, the late ones after the handoff. H's validity is not
			// extended by it (H hands off before its first validity ends).
			ac.Left--
			m.send(s, a, hMsg{Kind: hReqRefresh, Form: ac.Lock}, m.all())
			return nil
		}
		// Lock.Handoff: H's lock ends here.
		s.Handed = true
		s.Grants[ac.Grant].End = s.T
		ac.Phase = Done
		return nil
	case ac.Phase == Idle && a != ActC:
		// Client.Resume: a claim round with a new secret of its own.
		m.start(s, a)
		q := hMsg{Kind: hReqClaim, Round: ac.Round, Form: ac.Lock, New: secretW1 + a - ActW1}
		m.send(s, a, q, m.all())
		return nil
	case ac.Phase == Idle:
		ac.Left--
		m.start(s, a)
		m.send(s, a, hMsg{Kind: hReqAcquire, Round: ac.Round, Form: ac.Lock}, m.all())
		return nil
	case ac.Phase == Acquiring:
		return m.decide(s, a)
	case ac.Phase == Holding:
		// Release: the grant ends when the release starts.
		m.send(s, a, hMsg{Kind: hReqRelease, Form: ac.Lock}, m.all())
		if s.Grants[ac.Grant].End > s.T {
			s.Grants[ac.Grant].End = s.T
		}
		ac.Phase = Done
		if a == ActC && ac.Left > 0 {
			ac.Phase = Idle
		}
	}
	return nil
}

func (m *HandoffModel) start(s *HState, a int) {
	ac := &s.Actors[a]
	ac.Phase, ac.Start = Acquiring, s.T
	ac.Round++
	ac.Votes, ac.Lefts = [5]int8{}, [5]int64{}
}

// decide ends actor a's round: a claim as Client.Resume decides it, an
// acquire as an obtain does.
func (m *HandoffModel) decide(s *HState, a int) *Violation {
	c := &m.Cfg
	ac := &s.Actors[a]
	var yes, pending uint64
	var lefts []int64
	for ni := range c.Nodes {
		switch ac.Votes[ni] {
		case Yes:
			yes |= 1 << ni
			lefts = append(lefts, ac.Lefts[ni])
		case Pending:
			pending |= 1 << ni
		}
	}
	q := m.quorum()
	n := len(lefts)
	if a == ActC {
		valid := ac.Start + c.TTL - c.Drift
		if n >= q && s.T < valid {
			// The highest yes-vote (the acquire's Lefts are its votes).
			return m.granted(s, a, valid, false, slices.Max(lefts))
		}
		// A failed attempt gives back where the node took the lock or
		// may have (no answer yet).
		m.send(s, a, hMsg{Kind: hReqRelease, Form: ac.Lock}, yes|pending)
		ac.Phase = Idle
		if ac.Left == 0 {
			ac.Phase = Done
		}
		return nil
	}
	old := c.Mut.OldResume
	if !old {
		ac.Lock.Secret = secretW1 + a - ActW1 // the claim's new secret
	}
	if n < q {
		if !old {
			m.send(s, a, hMsg{Kind: hReqRelease, Form: ac.Lock}, yes|pending)
		}
		ac.Phase = Done
		return nil
	}
	// The quorum-th longest of the claimed times left, from before the
	// claim was sent (or from the decision, ValidityFromDecision).
	slices.Sort(lefts)
	left := lefts[n-q]
	from := ac.Start
	if c.Mut.ValidityFromDecision {
		from = s.T
	}
	valid := from + left - c.Drift
	if s.T >= valid-c.NodeTimeout {
		if !old {
			m.send(s, a, hMsg{Kind: hReqRelease, Form: ac.Lock}, m.all())
		}
		ac.Phase = Done
		return nil
	}
	return m.granted(s, a, valid, true, ac.Lock.Token)
}

// granted records actor a's grant, valid until valid, and checks it
// against every grant before it.
func (m *HandoffModel) granted(s *HState, a int, valid int64, resumed bool, token int64) *Violation {
	ac := &s.Actors[a]
	g := m.grantOf(a, ac.Lock, s.T, valid, resumed, token)
	ac.Phase, ac.ValidUntil, ac.Grant = Holding, valid, len(s.Grants)
	for _, e := range s.Grants {
		if e.End > g.At && m.conflicts(e, g) {
			return &Violation{Prop: "exclusion", Msg: fmt.Sprintf("%s granted at t=%d while %s holds until t=%d", actorName(a), g.At, actorName(e.Actor), e.End)}
		}
	}
	s.Grants = append(s.Grants, g)
	if !resumed {
		return nil
	}
	// docs/fencing.md's promise across holders: a resumed lock (with the
	// form's token) follows no conflicting grant of a higher token.
	for _, e := range s.Grants[:len(s.Grants)-1] {
		if e.At < g.At && e.Token > g.Token && m.conflicts(e, g) {
			return &Violation{Prop: "fencing", Msg: fmt.Sprintf("%s resumed at t=%d with token %d after %s's grant at t=%d with token %d",
				actorName(a), g.At, g.Token, actorName(e.Actor), e.At, e.Token)}
		}
	}
	s.Resumes++
	if s.Resumes > 1 {
		return &Violation{Prop: "once", Msg: fmt.Sprintf("the form is resumed a second time, by %s at t=%d", actorName(a), s.T)}
	}
	if h := m.handed(); ac.Lock.Kind != h.Kind || ac.Lock.Owner != h.Owner || ac.Lock.K != h.K {
		return &Violation{Prop: "kind", Msg: fmt.Sprintf("%s resumed a lock of kind %c owner %d k %d; the nodes hold kind %c owner %d k %d",
			actorName(a), ac.Lock.Kind, ac.Lock.Owner, ac.Lock.K, h.Kind, h.Owner, h.K)}
	}
	return nil
}

func actorName(a int) string { return [...]string{"H", "W1", "W2", "C"}[a] }

// describe says what step st does in s.
func (m *HandoffModel) describe(s *HState, st Step) string {
	switch st.Kind {
	case StepTick:
		return fmt.Sprintf("tick to t=%d", s.T+1)
	case StepProcess:
		q := s.Conns[st.Client*m.Cfg.Nodes+st.Node].Req[0]
		kind := [...]string{"", "claim", "refresh", "acquire", "release"}[q.Kind]
		return fmt.Sprintf("n%d runs %s's %s of %c/%d", st.Node+1, actorName(st.Client), kind, q.Form.Kind, q.Form.Secret)
	case StepDeliver:
		return fmt.Sprintf("%s hears from n%d", actorName(st.Client), st.Node+1)
	}
	ac := &s.Actors[st.Client]
	switch {
	case st.Client == ActH && ac.Left > 0:
		return "H sends a refresh"
	case st.Client == ActH:
		return "H hands the lock off"
	case ac.Phase == Idle && st.Client != ActC:
		return actorName(st.Client) + " resumes the form"
	case ac.Phase == Idle:
		return "C sends an acquire"
	case ac.Phase == Acquiring:
		return actorName(st.Client) + " decides its round"
	}
	return actorName(st.Client) + " releases"
}

// HCounterexample is a schedule that breaks a property, told step by step.
type HCounterexample struct {
	Steps []Step
	V     *Violation
	Trace []string
}

func (c *HCounterexample) String() string {
	return fmt.Sprintf("%s after %d steps:\n  %s", c.V, len(c.Steps), strings.Join(c.Trace, "\n  "))
}

// Replay plays steps from the initial state and returns the violation
// they reach, if any, with a trace.
func (m *HandoffModel) Replay(steps []Step) *HCounterexample {
	s := m.Init()
	var trace []string
	for i, st := range steps {
		if !slices.Contains(m.Enabled(s), st) {
			return nil
		}
		trace = append(trace, fmt.Sprintf("t=%d %s", s.T, m.describe(s, st)))
		if v := m.Apply(s, st); v != nil {
			return &HCounterexample{Steps: steps[:i+1], V: v, Trace: trace}
		}
	}
	return nil
}

// HStats counts a search's work.
type HStats struct {
	Schedules, States int
}

// Random plays n random schedules of at most maxSteps steps from the
// initial state, schedule i from seed+i, until one breaks a property or
// the deadline passes. Each schedule draws its strategy: a uniform choice
// among the enabled steps, or weights per actor (a connection, an actor's
// own steps, the clock) spread over three orders of magnitude, so that
// one connection lags far behind the others (a late request).
func (m *HandoffModel) Random(seed uint64, n, maxSteps int, deadline time.Time) (*HCounterexample, HStats) {
	var st HStats
	for i := range n {
		if i%64 == 0 && time.Now().After(deadline) {
			break
		}
		rng := rand.New(rand.NewPCG(seed+uint64(i), 0x4a0d))
		weights := map[Step]float64{}
		swarm := rng.IntN(2) == 0
		s := m.Init()
		var steps []Step
		for range maxSteps {
			en := m.Enabled(s)
			if len(en) == 0 {
				break
			}
			var x Step
			if swarm {
				x = pickWeighted(rng, en, weights)
			} else {
				x = pick(rng, en)
			}
			steps = append(steps, x)
			st.States++
			if v := m.Apply(s, x); v != nil {
				st.Schedules = i + 1
				return m.Replay(steps), st
			}
		}
		st.Schedules = i + 1
	}
	return nil, st
}
