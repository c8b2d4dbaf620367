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
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// ErrConfigConflict is returned by an obtain of a Client on one set of nodes
// that sees, on its nodes, that a Client of another set alone is alive or
// was within the max TTL: the two could hold one lock at once. During a
// move, it means step 2 of the runbook was cut short
// (docs/reconfiguration.md). The error names the other configuration.
var ErrConfigConflict = errors.New("redlock: another node configuration is in use on these nodes")

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
// configuration on its nodes at its first obtain and every max TTL / 4
// after (one script call per node, on a goroutine that Close stops), and
// an obtain returns ErrConfigConflict while the nodes show a move between
// this Client's set and another whose Clients alone are still alive. With
// them off, the Client neither records nor checks, and a move to this
// Client's set gets no move floor from it: a deployment that changes its
// nodes needs them on in every Client. Default on.
func WithConfigRecords(on bool) Option {
	return clientOption(func(c *config) { c.noRecords = !on })
}

// recordTTL is how long a configuration record outlives its write: a lock
// obtained before the next record (within recordStale) has expired before
// it does.
func (e *engine) recordTTL() time.Duration { return e.cfg.maxTTL + e.recordStale() }

// recordStale is the age past which an obtain records before it locks;
// the recording goroutine records twice as often.
func (e *engine) recordStale() time.Duration { return e.cfg.maxTTL / 2 }

// checkConfig is asked before each acquire round on the nodes: it records
// the Client's configuration when its last record is stale (the first
// obtain, or a recording goroutine that fell behind), starts the recording
// goroutine, and returns the last record's ErrConfigConflict, if any. The
// caller holds e.life for reading.
func (e *engine) checkConfig(ctx context.Context, timeout time.Duration) error {
	if e.cfg.noRecords {
		return nil
	}
	r := &e.rec
	r.loop.start(&e.bg, e.recordStale()/2, false, func(ctx context.Context) {
		e.record(ctx, e.cfg.nodeTimeoutFor(e.cfg.maxTTL), true)
	})
	r.state.Lock()
	stale := time.Since(r.last) >= e.recordStale()
	r.state.Unlock()
	if stale {
		e.record(ctx, timeout, false)
	}
	r.state.Lock()
	defer r.state.Unlock()
	return r.conflict
}

// moveFloor applies the move floor to a won acquire's token: a token below
// it is raised to it, by the second round (docs/reconfiguration.md,
// "Tokens across the move").
func (e *engine) moveFloor(token int64, second bool) (int64, bool) {
	r := &e.rec
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
// joint Client's relays and move floor, a Client's move floor on the set
// a move went to), and updates the recorder's conflict and floor. The
// recording goroutine's rounds (all) wait for every node up to timeout;
// an obtain's return once the kind's quorum rule is met, and a node that
// answers later can still report a conflict.
func (e *engine) record(ctx context.Context, timeout time.Duration, all bool) {
	r := &e.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &e.sets
	own := keys.ConfigSingle(s.curFP)
	if s.joint() {
		own = keys.ConfigJoint(s.curFP, s.nextFP)
	}
	ttl := e.recordTTL()
	started := time.Now()
	var late func(*script.Records)
	if !s.joint() {
		late = func(rc *script.Records) {
			if err := otherLones([]*script.Records{rc}, s.curFP); err != nil {
				r.state.Lock()
				r.conflict = err
				r.state.Unlock()
			}
		}
	}
	recs := e.recordRound(ctx, timeout, all, late, func(int) ([]script.RecordField, []script.RecordField) {
		return []script.RecordField{{Name: own, TTL: ttl}}, nil
	})
	answered := 0
	for _, rc := range recs {
		if rc != nil {
			answered++
		}
	}
	if answered == 0 {
		return
	}
	every := answered == len(e.nodes)
	fenceTTL := e.guards[0].FenceTTL
	var conflict error
	if s.joint() {
		// Relay each set's lone Clients to the other set's nodes (their
		// own records only: a relay of a relay would outlive the record by
		// the rounds' latencies), and once no Client of the current set
		// alone is seen anywhere, write the move floor of the next set.
		leftCur := lonesLeft(recs, false, s.curFP)
		leftNext := lonesLeft(recs, false, s.nextFP)
		seenCur := lonesLeft(recs, true, s.curFP)
		extra := func(i int) ([]script.RecordField, []script.RecordField) {
			var keep, first []script.RecordField
			if leftCur > 0 && s.next&(1<<i) != 0 && s.cur&(1<<i) == 0 {
				keep = append(keep, script.RecordField{Name: keys.ConfigSeen(s.curFP), TTL: leftCur})
			}
			if leftNext > 0 && s.cur&(1<<i) != 0 && s.next&(1<<i) == 0 {
				keep = append(keep, script.RecordField{Name: keys.ConfigSeen(s.nextFP), TTL: leftNext})
			}
			if every && seenCur == 0 && s.next&(1<<i) != 0 {
				first = append(first, script.RecordField{Name: keys.ConfigFloor(s.nextFP), TTL: fenceTTL})
			}
			return keep, first
		}
		if leftCur > 0 || leftNext > 0 || (every && seenCur == 0) {
			e.recordRound(ctx, timeout, true, nil, extra)
		}
	} else {
		conflict = otherLones(recs, s.curFP)
		if conflict == nil {
			floor := moveFloorOf(recs, s.curFP)
			if floor == 0 && every && movedTo(recs, s.curFP) {
				more := e.recordRound(ctx, timeout, true, nil, func(int) ([]script.RecordField, []script.RecordField) {
					return nil, []script.RecordField{{Name: keys.ConfigFloor(s.curFP), TTL: fenceTTL}}
				})
				floor = moveFloorOf(more, s.curFP)
			}
			r.state.Lock()
			r.floor = max(r.floor, floor)
			r.state.Unlock()
		}
	}
	r.state.Lock()
	r.last, r.conflict = started, conflict
	r.state.Unlock()
}

// recordRound runs record.lua on every node with the fields fields gives
// for it, waiting for every node up to timeout (all) or until the plain
// lock's quorum rule is met, and returns each node's records (nil for a
// node that did not answer by then). late, if set, gets the records of a
// node that answered after that.
func (e *engine) recordRound(ctx context.Context, timeout time.Duration, all bool, late func(*script.Records), fields func(i int) (keep, first []script.RecordField)) []*script.Records {
	key := keys.Layout{Prefix: e.cfg.prefix}.Configs()
	round := quorum.Round[*script.Records]{
		Nodes:   e.nodes,
		Quorum:  e.majority,
		Timeout: timeout,
		Wait:    quorum.WaitOnLoss,
		Call: func(ctx context.Context, n *quorum.Node) (*script.Records, error) {
			keep, first := fields(n.Index)
			rc, err := script.Record(ctx, n.Conn, key, keep, first)
			if err != nil {
				return nil, err
			}
			return &rc, nil
		},
		Agree: func(rc *script.Records) bool { return rc != nil },
	}
	if all {
		round.Quorum, round.Wait = quorum.Count(len(e.nodes)), quorum.WaitAll
	}
	if late != nil {
		round.Settle = func(_ *quorum.Node, rc *script.Records, err error, _, isLate bool) {
			if isLate && err == nil && rc != nil {
				late(rc)
			}
		}
	}
	res := round.Run(ctx, e.workers)
	out := make([]*script.Records, len(e.nodes))
	for i, rep := range res.Replies {
		if rep.Yes {
			out[i] = rep.Val
		}
	}
	return out
}

// lonesLeft is how long the evidence of a Client on set fp alone (its own
// field, and with relays a relay of it) lasts at the most on the nodes that
// answered.
func lonesLeft(recs []*script.Records, relays bool, fp string) time.Duration {
	fields := []string{keys.ConfigSingle(fp)}
	if relays {
		fields = append(fields, keys.ConfigSeen(fp))
	}
	left := time.Duration(0)
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for _, f := range fields {
			if v, ok := rc.Fields[f]; ok && v.Left > left {
				left = v.Left
			}
		}
	}
	return left
}

// otherLones returns ErrConfigConflict when the nodes show a move between
// set fp and another set (a joint Client's record) and a live Client of
// that other set alone (its record, or a joint Client's relay of it). A
// Client of another set that shares a node without a move between the two
// is not a conflict: nothing says the two are one deployment.
func otherLones(recs []*script.Records, fp string) error {
	moves := map[string]bool{}
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if a, b, ok := strings.Cut(strings.TrimPrefix(f, "j:"), ":"); ok && strings.HasPrefix(f, "j:") {
				switch fp {
				case a:
					moves[b] = true
				case b:
					moves[a] = true
				}
			}
		}
	}
	for i, rc := range recs {
		if rc == nil {
			continue
		}
		for f, v := range rc.Fields {
			if !strings.HasPrefix(f, "c:") && !strings.HasPrefix(f, "s:") {
				continue
			}
			other := f[2:]
			if other == fp || !moves[other] {
				continue
			}
			how := "records a Client"
			if f[0] == 's' {
				how = "holds a joint Client's report of a Client"
			}
			return fmt.Errorf("%w: node %d %s on node set %s alone, alive or holding locks for another %v; this Client's set is %s: finish step 2 of the move (docs/reconfiguration.md) before locking here",
				ErrConfigConflict, i, how, other, v.Left.Round(time.Millisecond), fp)
		}
	}
	return nil
}

// movedTo reports whether a node shows a live joint Client moving to fp.
func movedTo(recs []*script.Records, fp string) bool {
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if strings.HasPrefix(f, "j:") && strings.HasSuffix(f, ":"+fp) {
				return true
			}
		}
	}
	return false
}

// moveFloorOf is the move floor of a move to fp (x 1024), the largest the
// nodes show; 0 when none.
func moveFloorOf(recs []*script.Records, fp string) int64 {
	var m int64
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		if v, ok := rc.Fields[keys.ConfigFloor(fp)]; ok {
			m = max(m, v.First*script.TokenSeed)
		}
	}
	return m
}
