package model

import "testing"

// TestVoteChecksTheNodesIdentity plays the identity check of the model
// (identity.go) by hand on the unified configuration: an address
// re-pointed after the first contact reaches another node of the set,
// which refuses the vote and writes nothing; the client identifies the
// node again, finds the other node's identity and refuses its node set.
// With VoteByAddress the vote is given. A node restarted without its data
// refuses the vote too, and is named anew: the client's set names take
// its new identity, as the doctor's reading does.
func TestVoteChecksTheNodesIdentity(t *testing.T) {
	acquire := func(m *Model, s *State, ni int) Msg {
		t.Helper()
		cn := &s.Conns[uR*m.Cfg.Nodes+ni]
		cn.Req, cn.Rep = nil, nil
		m.sendTo(s, uR, Msg{Kind: ReqAcquire, Round: s.Clients[uR].Round, Value: 7, Arg: 8}, 1<<ni)
		if v := m.process(s, uR, ni); v != nil {
			t.Fatal(v)
		}
		rep := cn.Rep[0]
		m.deliver(s, uR, ni)
		return rep
	}
	for _, mut := range []bool{false, true} {
		cfg := unified()
		cfg.Mut.VoteByAddress = mut
		m := New(cfg)
		s := m.Init()
		m.contact(s, uR)
		if s.Clients[uR].IDs[2] != 3 || s.Clients[uR].Invalid {
			t.Fatalf("first contact: %+v", s.Clients[uR].Life)
		}
		// Node 2's address, as R reaches it, now leads to node 3.
		if v := m.Apply(s, Step{Kind: StepRepoint, Client: uR, Node: 2, Arg: 4}); v != nil {
			t.Fatal(v)
		}
		before := s.Clone()
		rep := acquire(m, s, 2)
		if mut {
			if rep.Status != Taken || s.Nodes[3].Data.Lock.Owner != 7 {
				t.Fatalf("VoteByAddress: n4 did not vote for node 2's address: %+v", rep)
			}
			continue
		}
		// Nothing written but the epoch record (the guard runs first).
		unguarded := func(d Data) Data { d.Rec, d.Ok = Record{}, OkKey{}; return d }
		if rep.Status != OtherNode || unguarded(s.Nodes[3].Data) != unguarded(before.Nodes[3].Data) || s.Nodes[2].Data != before.Nodes[2].Data {
			t.Fatalf("the re-pointed address: %+v, n4 %+v (was %+v)", rep, s.Nodes[3].Data, before.Nodes[3].Data)
		}
		if s.Clients[uR].Unknown != 1<<2 || s.Clients[uR].Votes[2] == Yes {
			t.Fatalf("the refusal: %+v", s.Clients[uR].Life)
		}
		m.reidentify(s, uR)
		if !s.Clients[uR].Invalid {
			t.Fatalf("node 2's address answers node 3's identity, and the client did not refuse its set: %+v", s.Clients[uR].Life)
		}
		s.Clients[uR].Phase, s.Clients[uR].AcqLeft = Idle, 1
		m.startAttempt(s, uR)
		if s.Clients[uR].Phase != Done {
			t.Fatalf("an invalid client made an attempt: phase %d", s.Clients[uR].Phase)
		}
	}

	// A restart without data: refused (the node has no identity), then
	// named anew.
	m := New(unified())
	s := m.Init()
	m.contact(s, uR)
	old := s.Clients[uR].Names
	if v := m.Apply(s, Step{Kind: StepRestart, Node: 2}); v != nil {
		t.Fatal(v)
	}
	s.T = s.Nodes[2].DownUntil
	// It recovers first, and says so (epoch.lua's epoch runs the guard
	// before the check); then it refuses the identity it no longer has.
	rep := acquire(m, s, 2)
	for i := 0; rep.Status == Recovering && i < 100; i++ {
		s.T++
		rep = acquire(m, s, 2)
	}
	if rep.Status != OtherNode || s.Nodes[2].Data.Lock.Owner != 0 {
		t.Fatalf("a node without its data voted, or wrote: %+v, %+v", rep, s.Nodes[2].Data)
	}
	m.reidentify(s, uR)
	cl := &s.Clients[uR]
	if cl.Invalid || cl.IDs[2] == 3 || cl.IDs[2] != s.Nodes[2].Data.ID || cl.Names.Cur == old.Cur {
		t.Fatalf("not named anew: %+v (names before %+v)", cl.Life, old)
	}
	if doc := m.doctorName(s, m.Cfg.SetA); doc.FP != cl.Names.Cur || doc.Alias != cl.Names.CurAlias {
		t.Fatalf("the client names A %+v, the doctor %+v", cl.Names, doc)
	}
	if rep := acquire(m, s, 2); rep.Status == OtherNode {
		t.Fatalf("refused again after the new identity: %+v", rep)
	}
}

// TestRepointBetweenTheRounds: an address re-pointed between an
// acquire's two rounds lands its raise on another node of the set, which
// refuses it (the second rounds check the identity too: fence.lua and
// seal.lua call node_is). R's first round takes yes-votes from nodes 3 and
// 4 (node 4's token the larger); R's address of node 3 then leads to node
// 4, whose refusal is no confirmation, and R is not granted. When the
// raises were not checked, R was granted on node 4's confirmation alone,
// node 3's counter never raised, and S then took nodes 2 and 3 with a
// lower token than R's (property (b) broken).
func TestRepointBetweenTheRounds(t *testing.T) {
	m := New(unified())
	s := m.Init()
	m.contact(s, uR)
	m.contact(s, uS)
	run := func(ci, ni int) {
		t.Helper()
		if v := m.process(s, ci, ni); v != nil {
			t.Fatalf("process: %v", v)
		}
		m.deliver(s, ci, ni)
	}
	r := &s.Clients[uR]
	// t=10: an acquire of R reaches node 2 alone (lost): node 2's counter.
	startAcquire(m, s, uR, 1000, 1<<2)
	run(uR, 2)
	s.T = 20
	// t=20: R's acquire, yes from nodes 3 and 4 (tokens differ).
	startAcquire(m, s, uR, 1001, 1<<3|1<<4)
	run(uR, 3)
	run(uR, 4)
	if v := m.clientStep(s, uR); v != nil || r.Phase != Won {
		t.Fatalf("first round: %v phase %d tokens %v", v, r.Phase, r.Tokens)
	}
	// R's address of node 3 now leads to node 4.
	if v := m.Apply(s, Step{Kind: StepRepoint, Client: uR, Node: 3, Arg: 5}); v != nil {
		t.Fatal(v)
	}
	if v := m.clientStep(s, uR); v != nil || r.Phase != Fencing {
		t.Fatalf("second round: %v", v)
	}
	run(uR, 3) // reaches node 4
	run(uR, 4)
	if v := m.clientStep(s, uR); v != nil || r.Phase == Holding {
		t.Fatalf("R granted on one server's raise counted as nodes 3 and 4: %v, phase %d", v, r.Phase)
	}
	m.Apply(s, Step{Kind: StepRepoint, Client: uR, Node: 3})
	// t=30: S acquires on nodes 2 and 3: no lower token than any granted.
	s.T = 30
	sc := &s.Clients[uS]
	startAcquire(m, s, uS, 2000, 1<<2|1<<3)
	run(uS, 2)
	run(uS, 3)
	v := m.clientStep(s, uS)
	for i := 0; v == nil && sc.Phase != Holding && sc.Phase != Idle && i < 10; i++ {
		if sc.Phase == Fencing {
			run(uS, 2)
			run(uS, 3)
		}
		v = m.clientStep(s, uS)
	}
	if v != nil {
		t.Fatalf("S: %v", v)
	}
}

// startAcquire starts client ci's acquire of value, with a TTL of 8, on
// the nodes of mask (by hand: its requests wait to be run).
func startAcquire(m *Model, s *State, ci, value int, mask uint64) {
	cl := &s.Clients[ci]
	cl.Value = value
	m.newRound(s, ci)
	cl.ValidUntil = s.T + 8
	cl.Phase = Acquiring
	m.sendTo(s, ci, Msg{Kind: ReqAcquire, Round: cl.Round, Value: value, Arg: 8}, mask)
}

// TestAcquireReadsTheIdentity: a client without configuration records
// (Conf 0) reads each node's identity with its first acquire there
// (Model.folds, the library's identities.fold, issue 50). On three
// distinct nodes it learns the three, from a late reply too, and its next
// requests carry them.
// With node 2's address re-pointed to node 1 before the first acquire
// (one server under two addresses), the second of the two replies shows
// an identity it already has: that vote does not count, the client
// refuses its node set, the attempt is not granted although two votes
// came, and it makes no other.
func TestAcquireReadsTheIdentity(t *testing.T) {
	cfg := Config{Nodes: 3, TTL: 8, MaxTTL: 8, NodeTimeout: 2, Delta: 1, FenceTTL: 80, Horizon: 64, Second: 1,
		Faults:  Faults{Repoints: 1},
		Clients: []ClientSpec{{Kind: Plain, Mode: '0', Acquires: 2, Release: true}}}
	round := func(m *Model, s *State, order []int) {
		t.Helper()
		m.startAttempt(s, 0)
		if s.Clients[0].Phase != Acquiring {
			t.Fatalf("no attempt: phase %d", s.Clients[0].Phase)
		}
		for _, ni := range order {
			if v := m.process(s, 0, ni); v != nil {
				t.Fatal(v)
			}
			m.deliver(s, 0, ni)
		}
	}

	m := New(cfg)
	s := m.Init()
	round(m, s, []int{0, 1, 2})
	cl := &s.Clients[0]
	// Nodes 0 and 1 decide the round; node 2's reply is late, and its
	// identity is learned all the same.
	if cl.Invalid || cl.IDs[0] == 0 || cl.IDs[1] == 0 || cl.IDs[2] == 0 || cl.Votes[0] != Yes || cl.Votes[1] != Yes {
		t.Fatalf("distinct nodes: %+v", cl.Life)
	}
	for ni := range 3 {
		if cl.IDs[ni] != s.Nodes[ni].Data.ID {
			t.Fatalf("node %d: learned %d, the node holds %d", ni, cl.IDs[ni], s.Nodes[ni].Data.ID)
		}
	}
	m.send(s, 0, Msg{Kind: ReqRelease, Round: cl.Round, Value: cl.Value})
	for ni := range 3 {
		if q := s.Conns[m.conn(0)*3+ni].Req[0]; q.Node != cl.IDs[ni] {
			t.Fatalf("a later request to node %d names identity %d, want %d", ni, q.Node, cl.IDs[ni])
		}
	}

	m = New(cfg)
	s = m.Init()
	if v := m.Apply(s, Step{Kind: StepRepoint, Client: 0, Node: 2, Arg: 2}); v != nil {
		t.Fatal(v)
	}
	round(m, s, []int{1, 2})
	cl = &s.Clients[0]
	if !cl.Invalid || cl.Votes[1] != Yes || cl.Votes[2] == Yes {
		t.Fatalf("one server under two addresses: %+v", cl.Life)
	}
	round2 := s.Clients[0].Round
	if v := m.process(s, 0, 0); v != nil {
		t.Fatal(v)
	}
	m.deliver(s, 0, 0)
	if v := m.decideFirst(s, 0); v != nil || cl.Phase != Idle || len(s.Grants) != 0 {
		t.Fatalf("granted on a set with one server twice: phase %d, grants %+v (%v)", cl.Phase, s.Grants, v)
	}
	m.startAttempt(s, 0)
	if cl.Phase != Done || cl.Round != round2 {
		t.Fatalf("an invalid client made another attempt: phase %d, round %d", cl.Phase, cl.Round)
	}
}
