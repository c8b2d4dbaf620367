package redlock

// This file holds the joint configuration (a move from one set of nodes to
// another, docs/reconfiguration.md): the option, the sets and their
// quorum rule, and the configuration records that make the move's step 2
// checkable.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// WithNextNodes puts the Client in joint configuration, moving from the
// nodes given to New (or NewFromNodes), the current set, to next: every
// acquire and refresh needs the quorum of its kind in the current set and
// in next, releases go to both, and the Client records the move on the
// nodes (docs/reconfiguration.md). A node of both sets is given in both:
// the same driver.Node, or, for a driver whose Info is Unique, a node with
// the same address (so New's go-redis clients and goredis.New of a client
// of the same address match). A node of next whose Info is not Unique (a
// Sentinel client) must be the same driver.Node as in the current set to
// count as the same node.
//
// New returns an error wrapping ErrInvalid when next is empty, holds a nil
// node or a node twice, or the two sets together have more than 64 nodes.
// Default: no next set.
func WithNextNodes(next ...driver.Node) Option {
	return clientOption(func(c *config) {
		c.next = next
		c.nextSet = true
	})
}

// WithConfigRecords turns the configuration records on or off
// (docs/reconfiguration.md): with them on, the Client records its node
// configuration on its nodes at its first obtain or Resume and every max
// TTL / 4 after (one script call per node, on a goroutine that Close
// stops), and an obtain or Resume returns ErrConfigConflict while the
// nodes show a move that touches one of this Client's sets and a live
// Client that shares none of them. With
// them off, the Client neither records nor checks, and a move to this
// Client's set gets no move floor from it: a deployment that changes its
// nodes needs them on in every Client. Default on.
func WithConfigRecords(on bool) Option {
	return clientOption(func(c *config) { c.noRecords = !on })
}

// recorder is the part of the engine that keeps the Client's
// configuration record on its nodes, and reads the others' there.
type recorder struct {
	w        *wiring
	ident    *identities // names the node sets; each node's guard
	sets     *nodeSets
	majority quorum.Rule // the plain lock's quorum rule (engine.majority)

	loop     loop       // the recording goroutine
	mu       sync.Mutex // held during a record round
	state    sync.Mutex // guards the fields below
	last     time.Time  // the last record that reached a node
	conflict error      // ErrConfigConflict, from the last record
	floor    int64      // the move floor x 1024; 0: none
}

// ttl is how long a configuration record outlives its write: a lock
// obtained before the next record (within stale) has expired before
// it does (joint.RecordTTL).
func (r *recorder) ttl() time.Duration {
	return time.Duration(joint.RecordTTL(int64(r.w.cfg.maxTTL)))
}

// stale is the age past which an obtain records before it locks;
// the recording goroutine records twice as often.
func (r *recorder) stale() time.Duration {
	return time.Duration(joint.RecordStale(int64(r.w.cfg.maxTTL)))
}

// check is asked before each round that can make the Client a holder: it
// records the Client's configuration when its last record is stale (the
// first obtain, or a recording goroutine that fell behind), starts the
// recording goroutine, and returns the last record's ErrConfigConflict, if
// any. With fold (the round is an acquire's), the first record, when no
// record reached a node yet, is instead folded into that acquire
// (foldFirst): check returns it, and makes no round of its own. The
// caller holds the engine's life for reading.
func (r *recorder) check(ctx context.Context, timeout time.Duration, fold bool) (*folded, error) {
	if r.w.cfg.noRecords {
		return nil, nil
	}
	if !r.loop.begun() {
		// Formed here only: a closure made on every obtain was one of
		// the cycle's allocations.
		r.loop.start(&r.w.bg, r.stale()/2, false, func(ctx context.Context) {
			r.record(ctx, r.w.cfg.nodeTimeoutFor(r.w.cfg.maxTTL), true)
		})
	}
	// The record must have started within stale before the acquire
	// starts, so that it outlives the lock by the max TTL: a record round
	// that took that long (a slow node, a paused process) is followed by
	// another, a few times at most. A round that reached no node leaves
	// the last record as it was; the acquire then meets the same nodes.
	for range 3 {
		r.state.Lock()
		last := r.last
		r.state.Unlock()
		if r.w.cfg.now().Sub(last) < r.stale() {
			break
		}
		if fold && last.IsZero() {
			if f := r.foldFirst(); f != nil {
				return f, nil
			}
		}
		r.record(ctx, timeout, false)
		r.state.Lock()
		same := r.last.Equal(last)
		r.state.Unlock()
		if same {
			break
		}
	}
	r.state.Lock()
	defer r.state.Unlock()
	return nil, r.conflict
}

// moveFloor applies the move floor to a won acquire's token: a token below
// it is raised to it, by the second round (docs/reconfiguration.md,
// "Tokens across the move").
func (r *recorder) moveFloor(token int64, second bool) (int64, bool) {
	r.state.Lock()
	floor := r.floor
	r.state.Unlock()
	if token < floor {
		return floor, true
	}
	return token, second
}

// record is one record round: it writes the Client's own field on every
// node and reads the live fields back, then writes what they call for (a
// joint Client's relays and move floor, the move floor of a Client on the
// set a move went to), and updates the recorder's conflict and floor. The
// decisions are joint.Decide's, which the model checker runs too. The
// recording goroutine's rounds (all) wait for every node up to timeout;
// an obtain's return once the kind's quorum rule is met, and a node that
// answers later can still report a conflict.
func (r *recorder) record(ctx context.Context, timeout time.Duration, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.jointSets()
	ttl := r.ttl()
	started := r.w.cfg.now()
	late := func(rc *script.Records, at time.Time) {
		recs := make([]*joint.Records, len(r.w.nodes))
		recs[0] = r.jointRecords(rc, at, started)
		if c := joint.Conflicting(recs, s); c != nil {
			r.state.Lock()
			r.conflict = r.conflictError(c, -1)
			r.state.Unlock()
		}
	}
	read := r.round(ctx, timeout, all, late, func(int) ([]script.RecordField, []script.FloorRaise) {
		own := s.Own()
		fields := make([]script.RecordField, len(own))
		for i, f := range own {
			fields[i] = script.RecordField{Name: f, TTL: ttl}
		}
		return fields, nil
	})
	r.decide(ctx, timeout, s, read, started)
}

// decide ends a record whose read round, begun at started, gave read:
// joint.Decide's plan on the live fields, the round of the writes it
// calls for, and the recorder's conflict and floor. It returns the
// conflict and whether the plan wrote; nothing changes when no node
// answered. The caller holds r.mu.
func (r *recorder) decide(ctx context.Context, timeout time.Duration, s joint.Sets, read []recordReply, started time.Time) (error, bool) {
	recs := make([]*joint.Records, len(r.w.nodes))
	answered := false
	for i, rc := range read {
		if rc.recs != nil {
			recs[i] = r.jointRecords(rc.recs, rc.at, started)
			answered = true
		}
	}
	if !answered {
		return nil, false
	}
	plan := joint.Decide(s, recs, joint.Params{
		MaxTTL:   r.w.cfg.maxTTL.Milliseconds(),
		FenceTTL: r.ident.guard(0).FenceTTL.Milliseconds(),
	}, joint.Mut{})
	floor := plan.Floor
	if plan.Write {
		more := r.round(ctx, timeout, true, nil, func(i int) ([]script.RecordField, []script.FloorRaise) {
			var keep []script.RecordField
			var raise []script.FloorRaise
			for _, k := range plan.Writes[i].Keep {
				keep = append(keep, script.RecordField{Name: k.Name, TTL: time.Duration(k.TTL) * time.Millisecond})
			}
			for _, f := range plan.Writes[i].Raise {
				raise = append(raise, script.FloorRaise{Name: f.Name, Ahead: time.Duration(f.Ahead) * time.Millisecond,
					Until: f.Until, TTL: time.Duration(f.TTL) * time.Millisecond})
			}
			return keep, raise
		})
		after := make([]*joint.Records, len(r.w.nodes))
		for i, rc := range more {
			if rc.recs != nil {
				after[i] = r.jointRecords(rc.recs, rc.at, started)
			}
		}
		floor = max(floor, joint.FloorOf(after, s.CurFP))
	}
	var conflict error
	if plan.Conflict != nil {
		conflict = r.conflictError(plan.Conflict, plan.Conflict.Node)
	}
	r.state.Lock()
	if conflict == nil {
		r.floor = max(r.floor, floor*script.TokenSeed)
	}
	r.last, r.conflict = started, conflict
	r.state.Unlock()
	return conflict, plan.Write
}

// jointSets are the Client's node sets as joint.Decide takes them.
func (r *recorder) jointSets() joint.Sets {
	s := r.sets
	r.ident.mu.Lock()
	defer r.ident.mu.Unlock()
	return joint.Sets{Cur: s.cur, Next: s.next, CurFP: s.curFP, NextFP: s.nextFP, Known: s.known,
		CurAlias: s.curAlias, NextAlias: s.nextAlias}
}

// jointRecords are a node's records as joint.Decide takes them
// (joint.FromScript), each field's life counted from now on the Client's
// clock: the reply arrived at at, in a round that started at started.
func (r *recorder) jointRecords(rc *script.Records, at, started time.Time) *joint.Records {
	return joint.FromScript(rc, r.w.cfg.now().Sub(at), at.Sub(started))
}

// conflictError is the ErrConfigConflict of the evidence c, seen on node
// i (-1: a node that answered late).
func (r *recorder) conflictError(c *joint.Conflict, i int) error {
	if c.Unplaced {
		return r.unplacedError(c)
	}
	how := "records a Client on node set " + c.Other + " alone"
	if _, seen, _ := keys.ParseConfigAlone(c.Field); seen {
		how = "holds a joint Client's report of a Client on node set " + c.Other + " alone"
	} else if a, b, ok := keys.ParseConfigJoint(c.Field); ok {
		how = "records a Client moving from node set " + a + " to " + b
	}
	node := "a node"
	if i >= 0 {
		node = fmt.Sprintf("node %d", i)
	}
	left := time.Duration(c.Left) * time.Millisecond
	return fmt.Errorf("%w: %s %s, alive or holding locks for another %v, which shares no node set with this Client (%s): finish step 2 of the move (docs/reconfiguration.md) before locking here",
		ErrConfigConflict, node, how, left.Round(time.Millisecond), r.setsName())
}

// unplacedError is the ErrConfigConflict of a Client that has not
// identified all its nodes, beside a move (joint.Decide with Sets.Known
// false).
func (r *recorder) unplacedError(c *joint.Conflict) error {
	r.ident.mu.Lock()
	var unknown []string
	for i, n := range r.w.nodes {
		if i >= len(r.ident.node) || r.ident.node[i] == "" {
			unknown = append(unknown, fmt.Sprintf("%d (%s)", i, n.Addr))
		}
	}
	r.ident.mu.Unlock()
	return fmt.Errorf("%w: the nodes show a move between node sets (record %s, alive for another %v), and this Client has not yet read the identity of node %s, which has not answered: until it has, it cannot tell the records of its own node sets from those of a Client it must not lock beside, and does not lock (docs/reconfiguration.md, \"A node's identity\")",
		ErrConfigConflict, c.Field, (time.Duration(c.Left) * time.Millisecond).Round(time.Millisecond), strings.Join(unknown, ", "))
}

// setsName names the Client's node sets in an error: its set, or the
// move between its two.
func (r *recorder) setsName() string {
	s := r.jointSets()
	if s.Joint() {
		return "moving from node set " + s.CurFP + " to " + s.NextFP
	}
	return "node set " + s.CurFP
}

// recordReply is a node's reply to a record round and when it arrived.
type recordReply struct {
	recs *script.Records
	at   time.Time
}

// round runs record.lua on every node with the fields fields gives
// for it, waiting for every node up to timeout (all) or until the plain
// lock's quorum rule is met, and returns each node's records and when
// they arrived (nil records for a node that did not answer by then). late,
// if set, gets the records of a node that answered after that.
func (r *recorder) round(ctx context.Context, timeout time.Duration, all bool, late func(*script.Records, time.Time), fields func(i int) ([]script.RecordField, []script.FloorRaise)) []recordReply {
	// The records live in the slot of {PREFIX}, beside the epoch record
	// of a standalone node, which on a Redis Cluster is that slot's.
	key, epochKey := keys.Layout{Prefix: r.w.cfg.prefix}.Configs(), keys.Layout{Prefix: r.w.cfg.prefix}.NodeEpoch()
	round := newRound[recordReply](r.w, r.majority, timeout, quorum.WaitOnLoss)
	round.Call = func(ctx context.Context, n *quorum.Node) (recordReply, error) {
		keep, raise := fields(n.Index)
		rc, err := script.Record(ctx, n.Conn, key, epochKey, r.ident.guard(n.Index), keep, raise)
		if err != nil {
			return recordReply{}, err
		}
		if rc.Recovering > 0 {
			return recordReply{}, recoveringError(rc.Recovering, r.w.cfg.maxTTL)
		}
		return recordReply{recs: &rc, at: r.w.cfg.now()}, nil
	}
	round.Agree = func(rc recordReply) bool { return rc.recs != nil }
	if all {
		round.Quorum, round.Wait = quorum.Count(len(r.w.nodes)), quorum.WaitAll
	}
	if late != nil {
		round.Settle = func(_ *quorum.Node, rc recordReply, err error, _, isLate bool) {
			if isLate && err == nil && rc.recs != nil {
				late(rc.recs, rc.at)
			}
		}
	}
	res := round.Run(ctx, r.w.workers)
	out := make([]recordReply, len(r.w.nodes))
	for i, rep := range res.Replies {
		if rep.Yes {
			out[i] = rep.Val
		}
	}
	return out
}

// folded is a Client's first record riding on its first acquire round
// (foldFirst; docs/reconfiguration.md, "The first obtain"): the fields
// each node's pipeline keeps before the acquire, and the records of the
// nodes that answered before the round was decided.
type folded struct {
	keep    []script.RecordField
	started time.Time
	mu      sync.Mutex
	closed  bool // the round was decided: later records are dropped
	read    []recordReply
}

// put keeps node i's records, read at at, unless the round was decided.
func (f *folded) put(i int, rc *script.Records, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.read[i] = recordReply{recs: rc, at: at}
	}
}

// close ends the round's records and returns them.
func (f *folded) close() []recordReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return f.read
}

// errRecordFirst ends an acquire whose folded first record called for
// writes (a move in sight): engine.attempt makes the acquire again.
var errRecordFirst = errors.New("redlock: the first configuration record calls for writes (a move of the nodes is in sight): made, before the acquire is made again")

// foldFirst folds the Client's first record into the acquire about to be
// sent, when it reads its nodes' identities itself (identities.fold: one
// set, standalone or Sentinel-managed nodes), no record reached a node
// yet and none is under way; nil otherwise. It holds r.mu until
// endFold, so that a record of another obtain waits for its decision.
// The record keeps the Client's field under its set's name by address:
// it knows no identity yet, and a reader that does not know the name
// counts it as a Client it must wait for. The name by the identities is
// kept from the next record on.
func (r *recorder) foldFirst() *folded {
	if !r.ident.fold || r.made() || !r.mu.TryLock() {
		return nil
	}
	if r.made() {
		r.mu.Unlock()
		return nil
	}
	s := r.jointSets()
	return &folded{keep: []script.RecordField{{Name: keys.ConfigSingle(s.CurAlias), TTL: r.ttl()}},
		started: r.w.cfg.now(), read: make([]recordReply, len(r.w.nodes))}
}

// made reports whether a record reached a node.
func (r *recorder) made() bool {
	r.state.Lock()
	defer r.state.Unlock()
	return !r.last.IsZero()
}

// endFold decides the folded record f, if any, once its acquire round is
// decided, on the Client's sets as named by the identities that round
// read (decide), and lets the next record run. It returns what ends the
// round: refused (the round's own refusal) if set, else the record's
// conflict, or errRecordFirst when the record called for writes (they
// are made; the caller makes the acquire again); nil to go on.
func (r *recorder) endFold(ctx context.Context, f *folded, timeout time.Duration, refused error) error {
	if f == nil {
		return refused
	}
	defer r.mu.Unlock()
	conflict, wrote := r.decide(ctx, timeout, r.jointSets(), f.close(), f.started)
	switch {
	case refused != nil:
		return refused
	case conflict != nil:
		return conflict
	case wrote:
		return errRecordFirst
	}
	return nil
}

// acquireRecorded is engine.acquireOn for an acquire that carries the Client's
// first record (folded): record.lua, the acquire and id.lua in one
// pipeline (script.Call.AcquireRecorded). The vote counts only where the
// record reached the node before it, and once the identity read with it
// is compared with the others' (learnRead).
func (r *recorder) acquireRecorded(ctx context.Context, n *quorum.Node, call script.Call, ack script.Ack, f *folded) (script.Acquired, error) {
	layout := keys.Layout{Prefix: r.w.cfg.prefix}
	rec := script.NewRecordCall(layout.Configs(), layout.NodeEpoch(), r.ident.guard(n.Index), f.keep, nil)
	a, recs, recErr, id, idErr, err := call.AcquireRecorded(ctx, n.Conn, ack, rec, layout.NodeID())
	if serr := r.ident.learnRead(n.Index, id, idErr); serr != nil {
		return a, serr
	}
	if err != nil {
		return a, kindError(err)
	}
	if recErr == nil && recs.Recovering > 0 {
		recErr = recoveringError(recs.Recovering, r.w.cfg.maxTTL)
	}
	if recErr != nil {
		if a.Status == script.Taken {
			return a, fmt.Errorf("the configuration record did not reach the node before the acquire: %w", recErr)
		}
		return a, nil
	}
	f.put(n.Index, &recs, r.w.cfg.now())
	return a, nil
}
