package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Stats counts an exploration's work.
type Stats struct {
	States      int // distinct states visited
	Transitions int // steps applied
	Schedules   int // complete schedules (random), or terminal states (DFS)
	Truncated   bool
	Elapsed     time.Duration
}

// Counterexample is a schedule that breaks a property.
type Counterexample struct {
	Violation *Violation
	Steps     []Step
	Trace     []string // one readable line per step
}

func (c *Counterexample) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s after %d steps:\n", c.Violation, len(c.Steps))
	for i, l := range c.Trace {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, l)
	}
	return b.String()
}

// Exhaustive searches every schedule depth first, with a visited set of
// state hashes, up to maxStates distinct states and until deadline. It
// returns the first counterexample found (nil if none).
func (m *Model) Exhaustive(maxStates int, deadline time.Time) (*Counterexample, Stats) {
	start := time.Now()
	var st Stats
	seen := make(map[uint64]struct{}, 1<<16)
	type frame struct {
		s     *State
		steps []Step
		next  int
	}
	init := m.Init()
	seen[init.Hash()] = struct{}{}
	st.States = 1
	stack := []frame{{s: init, steps: m.Enabled(init)}}
	path := []Step{}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next >= len(f.steps) {
			if len(f.steps) == 0 {
				st.Schedules++
			}
			stack = stack[:len(stack)-1]
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
			continue
		}
		step := f.steps[f.next]
		f.next++
		ns := f.s.Clone()
		st.Transitions++
		if v := m.Apply(ns, step); v != nil {
			steps := append(append([]Step{}, path...), step)
			st.Elapsed = time.Since(start)
			return m.Explain(steps, v), st
		}
		h := ns.Hash()
		if _, ok := seen[h]; ok {
			continue
		}
		seen[h] = struct{}{}
		st.States++
		if st.States >= maxStates || (st.States%4096 == 0 && time.Now().After(deadline)) {
			st.Truncated = true
			break
		}
		path = append(path, step)
		stack = append(stack, frame{s: ns, steps: m.Enabled(ns)})
	}
	st.Elapsed = time.Since(start)
	return nil, st
}

// Random plays schedules chosen at random (seeds seed, seed+1, ...): up
// to n schedules of at most maxSteps steps, until deadline. A failing
// schedule is shrunk.
func (m *Model) Random(seed uint64, n, maxSteps int, deadline time.Time) (*Counterexample, Stats) {
	return m.RandomFrom(nil, seed, n, maxSteps, deadline)
}

// RandomFrom is Random with every schedule beginning with prefix (Replay
// skips its steps that are not enabled): a targeted search of the
// continuations of a known start. maxSteps counts the steps after it.
func (m *Model) RandomFrom(prefix []Step, seed uint64, n, maxSteps int, deadline time.Time) (*Counterexample, Stats) {
	start := time.Now()
	var st Stats
	init := m.Init()
	var pre []Step
	for _, step := range prefix {
		if !m.can(init, step) {
			continue
		}
		if v := m.Apply(init, step); v != nil {
			panic("model: the prefix breaks " + v.Error())
		}
		pre = append(pre, step)
	}
	for i := range n {
		if i%16 == 0 && time.Now().After(deadline) {
			st.Truncated = true
			break
		}
		p := m.strategy(seed, i)
		s := init.Clone()
		steps := append([]Step(nil), pre...)
		for range maxSteps {
			step, ok := p.next(m, s)
			if !ok {
				break
			}
			steps = append(steps, step)
			st.Transitions++
			if v := m.Apply(s, step); v != nil {
				st.Schedules++
				st.Elapsed = time.Since(start)
				if m.NoShrink {
					return &Counterexample{Violation: v, Steps: steps}, st
				}
				steps = m.Shrink(steps, v.Prop, deadline.Add(30*time.Second))
				_, v2 := m.Replay(steps)
				return m.Explain(steps, v2), st
			}
		}
		if m.Observe != nil {
			m.Observe(s)
		}
		st.Schedules++
	}
	st.Elapsed = time.Since(start)
	return nil, st
}

// schedule is how one random schedule chooses its steps. A third of the
// schedules choose uniformly; a third give each actor (connection,
// client, clock, fault) a random priority and run the highest enabled
// one, changing the priority of the one that ran now and then (PCT-like):
// that delays one connection for long while others proceed, which
// uniform choice rarely does; a third give each actor a random weight,
// spread over three orders of magnitude, and choose among the enabled
// steps in proportion (swarm-like): slow actors still move, a step now
// and then, so that a request delayed past many others still runs before
// the end. With Model.Swarm, each schedule also injects its own subset of
// the kinds of fault, and a fourth of the schedules are partitions: groups
// of clients cut off groups of nodes for intervals of real time (their
// requests and replies wait), and clients paused for intervals, the steps
// chosen uniformly.
type schedule struct {
	rng    *rand.Rand
	mode   int
	prio   map[Step]float64
	swarm  bool
	faults uint32                      // the kinds of fault this schedule injects
	cuts   map[int][2]int64            // a connection's cut: [from, to) real time
	pauses map[int][2]int64            // a client's pause: [from, to) real time
	aim    func(*State, []Step) []Step // Model.Aim's filter
	// repoint is the schedule's re-pointed address (identity.go), nil
	// for none.
	repoint *repointPlan
}

// modes is how many strategies the schedules take in turn.
func (m *Model) modes() int {
	if m.Swarm {
		return 4
	}
	return 3
}

// strategy is schedule i's of a search from seed.
func (m *Model) strategy(seed uint64, i int) *schedule {
	p := &schedule{rng: rand.New(rand.NewPCG(seed+uint64(i), 0x5eed)), mode: i % m.modes(), prio: map[Step]float64{}, swarm: m.Swarm}
	if m.Aim != nil {
		p.aim = m.Aim(p.rng)
	}
	if !m.Swarm {
		return p
	}
	p.repoint = m.drawRepoint(seed, i)
	p.faults = p.rng.Uint32()
	if p.mode == 3 {
		p.partitions(m)
	}
	return p
}

// partitions draws a pause for each client with probability 1/4, and one
// to three partitions: each cuts a random group of clients off a random
// group of nodes; each pause and cut from a random time for 2 to 21 ticks.
// A connection cut twice is cut from the first start to the last end.
func (p *schedule) partitions(m *Model) {
	c := &m.Cfg
	p.cuts = map[int][2]int64{}
	p.pauses = map[int][2]int64{}
	for ci := range len(c.Clients) {
		if p.rng.IntN(4) == 0 {
			from := 10 + p.rng.Int64N(max(c.Horizon-10, 1))
			p.pauses[ci] = [2]int64{from, from + 2 + p.rng.Int64N(20)}
		}
	}
	for range 1 + p.rng.IntN(3) {
		from := 10 + p.rng.Int64N(max(c.Horizon-10, 1))
		to := from + 2 + p.rng.Int64N(20)
		clients, nodes := p.rng.Uint64(), p.rng.Uint64()
		for ci := range len(c.Clients) {
			for ni := range c.Nodes {
				if clients&(1<<ci) == 0 || nodes&(1<<ni) == 0 {
					continue
				}
				k := ci*c.Nodes + ni
				if old, ok := p.cuts[k]; ok {
					from, to = min(from, old[0]), max(to, old[1])
				}
				p.cuts[k] = [2]int64{from, to}
			}
		}
	}
}

// next is the schedule's next step in s (false: none is enabled).
func (p *schedule) next(m *Model, s *State) (Step, bool) {
	en := m.Enabled(s)
	if p.repoint != nil && len(en) > 0 {
		if st, ok := p.repoint.due(m, s); ok {
			return st, true
		}
	}
	if p.swarm {
		en = swarm(en, p.faults)
	}
	if p.cuts != nil {
		en = p.cut(m, s, en)
	}
	if p.aim != nil {
		en = p.aim(s, en)
	}
	if len(en) == 0 {
		return Step{}, false
	}
	switch p.mode {
	case 1:
		return pickPrio(p.rng, en, p.prio), true
	case 2:
		return pickWeighted(p.rng, en, p.prio), true
	}
	return pick(p.rng, en), true
}

// cut leaves out the steps of the connections cut, and of the clients
// paused, at s.T (a client's recorder runs on: the library's documented
// pause bound, joint_records.go).
func (p *schedule) cut(m *Model, s *State, en []Step) []Step {
	out := en[:0]
	in := func(c [2]int64, ok bool) bool { return ok && s.T >= c[0] && s.T < c[1] }
	for _, st := range en {
		switch st.Kind {
		case StepProcess, StepDeliver:
			if c, ok := p.cuts[st.Client*m.Cfg.Nodes+st.Node]; in(c, ok) {
				continue
			}
		case StepClient, StepEarly:
			if c, ok := p.pauses[st.Client]; in(c, ok) {
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

// swarm leaves out of en the kinds of fault that the schedule's draw
// faults turned off (swarm testing: each schedule injects its own subset
// of the faults, each kind with probability 1/2).
func swarm(en []Step, faults uint32) []Step {
	out := en[:0]
	for _, st := range en {
		g := -1
		switch st.Kind {
		case StepRestart:
			g = 0
		case StepDataRestart:
			g = 1
		case StepPromote, StepSync:
			g = 2
		case StepSnapshot, StepSnapRestart:
			g = 3
		case StepDup:
			g = 4
		case StepEarly:
			g = 5
		}
		if g >= 0 && faults&(1<<g) == 0 {
			continue
		}
		out = append(out, st)
	}
	return out
}

// actor is the part of a step that names who acts.
func actor(s Step) Step {
	switch s.Kind {
	case StepTick:
		return Step{Kind: StepTick}
	case StepClient:
		return Step{Kind: StepClient, Client: s.Client}
	}
	return Step{Kind: s.Kind, Client: s.Client, Node: s.Node}
}

func pickPrio(rng *rand.Rand, en []Step, prio map[Step]float64) Step {
	best, bp := en[0], -1.0
	for _, s := range en {
		a := actor(s)
		p, ok := prio[a]
		if !ok {
			p = rng.Float64()
			if s.Kind >= StepRestart {
				p /= 4
			}
			prio[a] = p
		}
		if p > bp {
			best, bp = s, p
		}
	}
	if rng.IntN(6) == 0 {
		prio[actor(best)] = rng.Float64()
	}
	return best
}

// pickWeighted chooses among en in proportion to each actor's weight,
// drawn the first time the actor is seen: log-uniform in [0.001, 1],
// faults a quarter of that.
func pickWeighted(rng *rand.Rand, en []Step, weight map[Step]float64) Step {
	total := 0.0
	for _, s := range en {
		a := actor(s)
		w, ok := weight[a]
		if !ok {
			w = math.Pow(10, -3*rng.Float64())
			if s.Kind >= StepRestart {
				w /= 4
			}
			weight[a] = w
		}
		total += w
	}
	x := rng.Float64() * total
	for _, s := range en {
		x -= weight[actor(s)]
		if x < 0 {
			return s
		}
	}
	return en[len(en)-1]
}

// pick chooses a step, favouring node and client work over ticks so that
// rounds complete, and faults rarely.
func pick(rng *rand.Rand, en []Step) Step {
	for {
		s := en[rng.IntN(len(en))]
		switch s.Kind {
		case StepTick:
			if rng.IntN(3) != 0 {
				continue
			}
		case StepRestart, StepDataRestart, StepPromote, StepSnapRestart, StepDup, StepEarly:
			if rng.IntN(8) != 0 {
				continue
			}
		}
		return s
	}
}

// Replay applies steps from the initial state, skipping those not enabled,
// and returns the steps applied up to and including the first violation.
func (m *Model) Replay(steps []Step) ([]Step, *Violation) {
	s := m.Init()
	var done []Step
	for _, step := range steps {
		if !m.can(s, step) {
			continue
		}
		done = append(done, step)
		if v := m.Apply(s, step); v != nil {
			return done, v
		}
	}
	return done, nil
}

func enabled(en []Step, s Step) bool {
	for _, e := range en {
		if e == s {
			return true
		}
	}
	return false
}

// Shrink removes steps from a schedule that breaks property prop while it
// still does: chunks, then single steps, until no removal keeps it failing
// (or deadline).
func (m *Model) Shrink(steps []Step, prop string, deadline time.Time) []Step {
	fails := func(c []Step) ([]Step, bool) {
		d, v := m.Replay(c)
		return d, v != nil && v.Prop == prop
	}
	steps, _ = m.Replay(steps)
	for chunk := len(steps) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(steps); {
			if time.Now().After(deadline) {
				return steps
			}
			cand := append(append([]Step{}, steps[:i]...), steps[i+chunk:]...)
			if d, ok := fails(cand); ok {
				steps = d
				continue
			}
			i += chunk
		}
	}
	return steps
}

// Explain replays steps and describes each.
func (m *Model) Explain(steps []Step, v *Violation) *Counterexample {
	s := m.Init()
	ce := &Counterexample{Violation: v, Steps: steps}
	for _, st := range steps {
		line := m.describe(s, st)
		if v2 := m.Apply(s, st); v2 != nil {
			ce.Violation = v2
			line += "  => " + v2.Error()
		}
		ce.Trace = append(ce.Trace, line)
	}
	return ce
}

var kindName = map[int]string{ReqAcquire: "acquire", ReqFence: "fence", ReqRefresh: "refresh", ReqRelease: "release", ReqRecord: "record", ReqClaim: "claim"}

// describe says what st does in s (before it is applied).
func (m *Model) describe(s *State, st Step) string {
	if d, ok := m.describeIdentity(s, st); ok {
		return d
	}
	if d, ok := m.describeRecord(s, st); ok {
		return d
	}
	if d, ok := m.describeMore(s, st); ok {
		return d
	}
	c := &m.Cfg
	who := string(rune('A' + st.Client))
	at := fmt.Sprintf("t=%d ", s.T)
	switch st.Kind {
	case StepTick:
		return at + "time passes"
	case StepProcess:
		n := &s.Nodes[st.Node]
		q := s.Conns[st.Client*c.Nodes+st.Node].Req[0]
		who = string(rune('A' + q.Actor))
		d := n.Data // a copy: describe must not change s
		env := n.env(s.T, c.Second)
		head := fmt.Sprintf("%sn%d (clock %d) runs %s's %s", at, st.Node+1, env.Now, who, kindName[q.Kind])
		if m.family(q.Actor) {
			return m.describeFamily(s, q, d, env, head)
		}
		if m.permit(q.Actor) {
			return m.describePermit(q, d, env, head)
		}
		switch q.Kind {
		case ReqAcquire:
			old := d.Fence.V
			status, x := d.Acquire(env, q.Value, q.Arg, m.guard(q.Actor), c.Mut)
			switch status {
			case Taken:
				return fmt.Sprintf("%s: yes, token %d (counter was %d)", head, x, old)
			case Held:
				return fmt.Sprintf("%s: no, held for %d", head, x)
			case KindError:
				return head + ": no, the lock family holds the name"
			}
			return fmt.Sprintf("%s: recovering for %d", head, x)
		case ReqFence:
			lock := d.Lock
			d.expire(env)
			old := counterName(d.Fence)
			d.Raise(env, q.Arg, m.guard(q.Actor), c.Mut)
			return fmt.Sprintf("%s %d: counter %s -> %d (lock key: %s)", head, q.Arg, old, d.Fence.V, m.owner(s, d.Lock, lock))
		case ReqRefresh:
			r := d.Refresh(env, q.Value, q.Arg, q.Tok, m.guard(q.Actor), c.Mut)
			return fmt.Sprintf("%s: %s", head, refreshSays(r))
		case ReqRelease:
			deleted, _ := d.Release(env, q.Value, q.Tok, true, m.guard(q.Actor), c.Mut)
			return fmt.Sprintf("%s: deleted %v, counter %s", head, deleted, counterName(d.Fence))
		}
		return head
	case StepDeliver:
		q := s.Conns[st.Client*c.Nodes+st.Node].Rep[0]
		who = string(rune('A' + q.Actor))
		cl := &s.Clients[q.Actor]
		late := q.Round != cl.Round || cl.Votes[st.Node] != Pending || m.countsDecided(s, q.Actor)
		extra := ""
		if late {
			extra = " (late: ignored)"
		}
		return fmt.Sprintf("%s%s receives n%d's %s reply%s", at, who, st.Node+1, kindName[q.Kind], extra)
	case StepClient:
		cl := &s.Clients[st.Client]
		yes, _ := m.counts(cl)
		ym, _ := m.masks(cl)
		won := m.met(st.Client, ym) && s.T < cl.ValidUntil
		switch cl.Phase {
		case Idle:
			if cl.AcqLeft == 0 {
				return at + who + " is done"
			}
			return fmt.Sprintf("%s%s sends acquire to all nodes (TTL %d, valid until %d)", at, who, c.Clients[st.Client].TTL, s.T+c.Clients[st.Client].TTL-c.Drift)
		case Acquiring:
			if won && m.family(st.Client) {
				t, seal := m.familyToken(cl)
				then := fmt.Sprintf("GRANTED token %d", t)
				if seal {
					then = fmt.Sprintf("token %d needs the seal", t)
				}
				return fmt.Sprintf("%s%s wins the first round with %d yes-votes %s: %s", at, who, yes, m.votes(cl), then)
			}
			if won {
				return fmt.Sprintf("%s%s wins the first round with %d yes-votes %s", at, who, yes, m.votes(cl))
			}
			return fmt.Sprintf("%s%s loses the first round (%d yes)", at, who, yes)
		case Won:
			if m.family(st.Client) {
				return fmt.Sprintf("%s%s sends seal %d to all nodes", at, who, cl.Token)
			}
			return fmt.Sprintf("%s%s's votes differ: sends fence %d to all nodes", at, who, cl.Token)
		case Fencing:
			if won {
				return fmt.Sprintf("%s%s's second round is confirmed by %d nodes: GRANTED token %d", at, who, yes, cl.Token)
			}
			return fmt.Sprintf("%s%s's second round fails (%d confirmations)", at, who, yes)
		case Holding:
			switch {
			case s.T >= cl.ValidUntil:
				return at + who + "'s lock has run out"
			case cl.RefLeft > 0:
				return at + who + " sends refresh to all nodes"
			case c.Clients[st.Client].Release:
				return at + who + " releases"
			}
			return at + who + " stops using the lock"
		case Refreshing:
			return fmt.Sprintf("%s%s decides its refresh (%d yes)", at, who, yes)
		}
	case StepRestart:
		return fmt.Sprintf("%sn%d restarts without its data", at, st.Node+1)
	case StepDataRestart:
		return fmt.Sprintf("%sn%d restarts with its data", at, st.Node+1)
	case StepPromote:
		return fmt.Sprintf("%sn%d fails over to its replica (clock offset %d, data as last synced)", at, st.Node+1, st.Arg)
	case StepSync:
		return fmt.Sprintf("%sn%d's replica catches up", at, st.Node+1)
	}
	return at + "?"
}

func (m *Model) owner(s *State, now, before Key) string {
	if before.Owner != 0 && now.Owner == 0 {
		return "expired"
	}
	if now.Owner == 0 {
		return "none"
	}
	for ci, cl := range s.Clients {
		if cl.Value == now.Owner {
			return string(rune('A' + ci))
		}
	}
	return "old"
}

func (m *Model) votes(cl *Client) string {
	var parts []string
	for i, v := range cl.Votes {
		switch {
		case v == Yes && cl.Existed[i]:
			parts = append(parts, fmt.Sprintf("n%d:existed t=%d counter=%d", i+1, cl.Tokens[i], cl.Counters[i]))
		case v == Yes:
			parts = append(parts, fmt.Sprintf("n%d:%d", i+1, cl.Tokens[i]))
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// describeFamily says what a family script does on d (a copy).
func (m *Model) describeFamily(s *State, q Msg, d Data, env Env, head string) string {
	c := &m.Cfg
	mode, owner := m.holdOf(q.Actor, q.Value)
	if q.Owner != 0 {
		owner = q.Owner // a resumed hold's, the form's
	}
	g := m.guard(q.Actor)
	head = fmt.Sprintf("%s (%s)", head, holdName(mode, owner, q.Value))
	before := famState(d, env)
	switch q.Kind {
	case ReqAcquire:
		status, x, existed, counter := d.FamAcquire(env, mode, owner, q.Value, q.Arg, g, c.Mut)
		switch {
		case status == Taken && existed:
			return fmt.Sprintf("%s on %s: yes, re-entry, recorded t=%d, counter %d", head, before, x, counter)
		case status == Taken:
			return fmt.Sprintf("%s on %s: yes, token %d -> %s", head, before, x, famState(d, env))
		case status == Held:
			return fmt.Sprintf("%s on %s: no, held for %d", head, before, x)
		case status == KindError:
			return fmt.Sprintf("%s: no, a plain lock holds the name", head)
		}
		return fmt.Sprintf("%s: recovering for %d", head, x)
	case ReqFence:
		d.expire(env)
		old := counterName(d.Fence)
		d.Seal(env, q.Arg, owner, g, c.Mut)
		return fmt.Sprintf("%s %d on %s: counter %s -> %d, now %s", head, q.Arg, before, old, d.Fence.V, famState(d, env))
	case ReqRefresh:
		r := d.FamRefresh(env, mode, owner, q.Value, q.Arg, q.Tok, g, c.Mut)
		if r == ScriptError {
			return head + ": error, a plain lock holds the name"
		}
		return fmt.Sprintf("%s on %s: %s -> %s", head, before, refreshSays(r), famState(d, env))
	case ReqRelease:
		deleted, _, _ := d.FamRelease(env, mode, owner, q.Value, q.Tok, true, g, c.Mut)
		return fmt.Sprintf("%s on %s: deleted %v -> %s", head, before, deleted, famState(d, env))
	}
	return head
}

// counterName shows a counter's value, or that it is missing (expired).
func counterName(c Counter) string {
	if !c.OK {
		return "missing"
	}
	return fmt.Sprint(c.V)
}

func holdName(mode byte, owner, hold int) string {
	if mode == 'r' {
		return fmt.Sprintf("read hold h%d", hold)
	}
	return fmt.Sprintf("write hold h%d of owner %s", hold, ownerName(owner))
}

func ownerName(o int) string {
	if o < 1<<20 {
		return fmt.Sprintf("P%d", o)
	}
	return fmt.Sprintf("x%d", o-1<<20)
}

// famState shows the lock's hash on a node (holds live at env's time).
func famState(d Data, env Env) string {
	d.expire(env)
	f := d.Fam
	if !f.OK {
		if d.Lock.Owner != 0 {
			return "plain lock"
		}
		return "free"
	}
	var hs []string
	for _, h := range f.Holds {
		if h.ID != 0 && h.Exp > env.Now {
			hs = append(hs, fmt.Sprintf("h%d", h.ID))
		}
	}
	if len(hs) == 0 {
		return "free (expired holds)"
	}
	if f.Mode == 'r' {
		return fmt.Sprintf("{r %s}", strings.Join(hs, " "))
	}
	if f.Mode == 's' {
		return fmt.Sprintf("{s k=%d %s}", f.K, strings.Join(hs, " "))
	}
	t := "no t"
	if f.T > 0 {
		t = fmt.Sprintf("t=%d", f.T)
	}
	return fmt.Sprintf("{w %s %s %s}", ownerName(f.Owner), t, strings.Join(hs, " "))
}
