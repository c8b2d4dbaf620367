package redlock

import (
	"context"
	"errors"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/adaptive"
	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waitq"
)

// engine is the state a Client shares with its locks: the nodes and their
// rounds, the settings, the owner of every background goroutine, the
// registry of held locks, the keep-alive's schedule, the circuit breaker's
// state, the adaptive TTL's policy, the local wait queues and the
// observers. Everything above it in this package (the lock, the obtain
// loop, the keep-alive, the Client) works through it; it knows none of
// them, nor the kinds (docs/engine.md, Layers).
type engine struct {
	cfg   config
	nodes []*quorum.Node
	// majority is the plain lock's quorum rule: N/2+1, or in a joint
	// configuration a majority of each set (joint.go).
	majority quorum.Rule
	sets     nodeSets // the current and next node sets (joint.go)
	rec      recorder // the configuration records (joint.go)
	hubs     []driver.Notifier
	// guards are each node's guard setting, encoded once. epochKey is the
	// epoch record of a standalone node; cluster is set when some node is a
	// Redis Cluster (see lockKeys.on). plainNode is the first node that is
	// not (-1 if none): every such node shares one prepared script call
	// per lock.
	guards    []script.Guard
	epochKey  string
	cluster   bool
	plainNode int

	// bg owns the goroutines of requests that outlive the call that made
	// them (replies that arrive after a quorum decision, and their
	// clean-up), the keep-alive's refreshes, the breaker's probes and the
	// sampler. Close waits for them. workers start the requests'
	// goroutines of the rounds, counted in bg, and keep them for a while.
	bg      sync.WaitGroup
	workers *quorum.Workers

	// life is held for reading by every call that may start background
	// goroutines, and for writing by Close while it marks the Client
	// closed, so that no goroutine is added to bg while Close waits on it.
	life      sync.RWMutex
	mu        sync.Mutex
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	held      map[releaser]struct{}

	// sched runs the keep-alive: automatic refreshes and loss deadlines;
	// its entries' values are *Lock. epoch is the origin of the refresh
	// grid.
	sched *keepalive.Scheduler[any]
	epoch time.Time

	brk     breakerState
	adapt   *adaptive.Policy // WithAdaptiveTTL; nil when off
	sampler samplerState
	waits   waitq.Queues
	nodeLog nodeLog
	ident   identityState // no server given twice (identity.go)
}

// releaser is a held lock, as the registry that Close releases sees it.
type releaser interface {
	Release(context.Context) error
}

// workerIdle is how long a request goroutine waits for the next request
// before it ends (quorum.Workers).
const workerIdle = 500 * time.Millisecond

// batchWindow: locks whose keep-alive events fall within it of the
// earliest due one are handled together, so that their refreshes share one
// pipeline per node. Refreshing up to this much early costs nothing in
// safety.
const batchWindow = 2 * time.Millisecond

// minReleaseTimeout is the least time a release waits for a node.
const minReleaseTimeout = 100 * time.Millisecond

// init checks the nodes and builds the engine over them in place (its
// goroutines' owner is its own WaitGroup); fire is the keep-alive's handler
// of due locks. It does no I/O.
func (e *engine) init(nodes []driver.Node, cfg config, fire func(due []*keepalive.Entry[any])) error {
	if len(nodes) == 0 {
		return invalid("no nodes given")
	}
	nodes, sets, err := joinNodes(nodes, cfg.next, cfg.nextSet)
	if err != nil {
		return err
	}
	e.sets = sets
	if len(nodes) > limits.MaxNodes {
		return invalid("%d nodes given; at most %d", len(nodes), limits.MaxNodes)
	}
	e.cfg = cfg
	e.nodes = make([]*quorum.Node, len(nodes))
	e.majority = e.rule(&plainSpec)
	e.held = make(map[releaser]struct{})
	e.plainNode = -1
	e.closeDone = make(chan struct{})
	e.epoch = time.Now() // only the grid's phase; not read through cfg.now
	e.epochKey = keys.Layout{Prefix: cfg.prefix}.NodeEpoch()
	addrs := make(map[string]int, len(nodes))
	for i, n := range nodes {
		info := n.Info()
		if info.Unique {
			if j, dup := addrs[info.Addr]; dup {
				return invalid("node %d has the same address %s as node %d", i, info.Addr, j)
			}
			addrs[info.Addr] = i
		}
		e.nodes[i] = quorum.NewNode(i, n, cfg.maxInFlight)
		e.cluster = e.cluster || info.Sharded
		if !info.Sharded && e.plainNode < 0 {
			e.plainNode = i
		}
	}
	for i := range e.nodes {
		e.guards = append(e.guards, e.newGuard(i))
	}
	if a := cfg.adaptive; a != nil {
		e.adapt = adaptive.New(adaptive.Settings{Min: a.Min, Max: a.Max, RTTMultiple: a.RTTMultiple,
			ContentionHalf: a.ContentionHalf, SampleInterval: a.SampleInterval})
		e.sampler.evicted = make([]int64, len(e.nodes))
		e.sampler.warm = make([]bool, len(e.nodes))
		for i := range e.sampler.evicted {
			e.sampler.evicted[i] = -1
		}
	}
	for _, n := range nodes {
		e.hubs = append(e.hubs, n.Notifier())
	}
	e.workers = quorum.NewWorkers(&e.bg, workerIdle)
	e.sched = keepalive.New(batchWindow, cfg.now, fire)
	return nil
}

// guard is the epoch guard's setting for node i, prepared by newEngine.
func (e *engine) guard(i int) script.Guard { return e.guards[i] }

// newGuard is the epoch guard's setting for node i.
func (e *engine) newGuard(i int) script.Guard {
	mode := byte('1')
	switch e.cfg.guard {
	case GuardTrustPersistence:
		mode = 'p'
	case GuardOff:
		mode = '0'
	}
	g := script.Guard{
		MaxTTL:   e.cfg.maxTTL,
		Delta:    limits.EpochTrust,
		Mode:     mode,
		FenceTTL: max(time.Hour, 10*e.cfg.maxTTL),
	}
	if e.nodes[i].Cluster {
		// One record per lock: let the records of idle locks go. A
		// missing record is safe (see epoch.lua).
		g.RecordTTL = max(24*time.Hour, 10*e.cfg.maxTTL)
	}
	return g.Prepared()
}

func (e *engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// register adds a held lock to the registry that Close releases.
func (e *engine) register(l releaser) {
	e.mu.Lock()
	e.held[l] = struct{}{}
	e.mu.Unlock()
}

// forget removes a released lock from the registry.
func (e *engine) forget(l releaser) {
	e.mu.Lock()
	delete(e.held, l)
	e.mu.Unlock()
}

// lockKeys are the Redis keys of one lock: its key, its fencing counter,
// and on a Redis Cluster its epoch record.
type lockKeys struct {
	key, fence, clusterEpoch string
}

// keysOf forms the keys of the lock of key.
func (e *engine) keysOf(key string) lockKeys {
	k := lockKeys{key: key, fence: keys.Fence(key)}
	if e.cluster {
		k.clusterEpoch = keys.ClusterEpoch(key)
	}
	return k
}

// on are the lock's keys on node i. The epoch record is one per node,
// except on a Redis Cluster, where a script may only touch the slot of its
// lock: there each lock's hash tag has a record of its own.
func (k lockKeys) on(e *engine, i int) script.Keys {
	sk := script.Keys{Lock: k.key, Fence: k.fence, Epoch: e.epochKey}
	if e.nodes[i].Cluster {
		sk.Epoch = k.clusterEpoch
	}
	return sk
}

// redisKey is the Redis key of a lock name: the prefix and the name inside
// one hash tag, so that every key of a lock lands in one Cluster slot
// (internal/keys).
func (e *engine) redisKey(name string) (string, error) {
	key, err := keys.Layout{Prefix: e.cfg.prefix}.Lock(name)
	if err != nil {
		return "", invalid("%v", err)
	}
	return key, nil
}

// grid moves a refresh time t of a lock refreshed every interval down onto
// a grid of interval/16 steps, so that locks with the same interval fall
// into at most 16 cohorts per period and share pipelines. Refreshing up to
// interval/16 early costs a little traffic and nothing in safety.
func (e *engine) grid(t time.Time, interval time.Duration) time.Time {
	step := interval / 16
	if step <= batchWindow {
		return t
	}
	d := t.Sub(e.epoch)
	return t.Add(-(d % step))
}

// ttlFor is the TTL of an attempt or refresh of the lock key whose caller
// gave base, and why (ObtainEvent.TTLReason); base has passed checkTTL.
func (e *engine) ttlFor(key string, base time.Duration, fixed bool) (time.Duration, string) {
	if e.adapt == nil || fixed {
		return base, adaptive.Given
	}
	now := time.Now()
	ttl, why, atMax := e.adapt.Choose(key, base, e.waits.Waiting(key), now)
	if l := e.cfg.logger; l != nil && atMax > 0 && e.nodeLog.due(-1, logRTTAtMax, now) {
		l.LogAttrs(context.Background(), slog.LevelWarn,
			"redlock: adaptive TTL capped at Max although the nodes' round-trip time asks for more: validity margins are thinner than RTTMultiple",
			slog.Duration("rtt_p95", atMax), slog.Float64("wanted_seconds", e.cfg.adaptive.RTTMultiple*atMax.Seconds()), slog.Duration("max", e.cfg.adaptive.Max))
	}
	return ttl, why
}

// observeRTT records a round's round trips for the adaptive TTL: each
// node's latency, or the round's timeout for a node that did not answer in
// time.
func observeRTT[T any](e *engine, replies []quorum.Reply[T], timeout time.Duration) {
	if e.adapt == nil {
		return
	}
	ds := make([]time.Duration, 0, len(replies))
	for _, r := range replies {
		d := r.Latency
		if d <= 0 && errors.Is(r.Err, quorum.ErrTimeout) {
			d = timeout
		}
		ds = append(ds, d)
	}
	e.adapt.AddRTT(time.Now(), ds...)
}

// observed is true when anything watches the Client.
func (e *engine) observed() bool { return e.cfg.hook != nil || e.cfg.logger != nil }

// emit passes an event to the hook, if any.
func (e *engine) emit(ctx context.Context, ev Event) {
	if h := e.cfg.hook; h != nil {
		h.Observe(ctx, ev)
	}
}

// lockIDs and obtainIDs number the locks and the obtains that a hook or
// logger observes.
var lockIDs, obtainIDs atomic.Uint64

// nodeResults turns a round's replies into NodeResults. disagree gives the
// reason of a node that answered without error but did not agree.
func nodeResults[T any](e *engine, res quorum.Result[T], disagree func(T) error) []NodeResult {
	out := make([]NodeResult, len(res.Replies))
	for i, r := range res.Replies {
		err := r.Err
		if err == nil && !r.Yes {
			err = disagree(r.Val)
		}
		out[i] = NodeResult{Node: i, Addr: e.nodes[i].Addr, Err: err, Reason: reason(err), Latency: r.Latency}
	}
	return out
}

// quorumError describes a round that did not win. disagree gives the
// reason of a node that answered without error but did not agree.
func quorumError[T any](e *engine, need quorum.Rule, op string, res quorum.Result[T], sentinel error, disagree func(T) error) *QuorumError {
	qe := &QuorumError{Op: op, Need: need.Need(), Agreed: res.Agreed, detail: ruleDetail(need)}
	if sentinel != nil {
		qe.sentinels = []error{sentinel}
	}
	for i, r := range res.Replies {
		if r.Yes {
			continue
		}
		err := r.Err
		if err == nil {
			err = disagree(r.Val)
		}
		qe.Nodes = append(qe.Nodes, NodeResult{Node: i, Addr: e.nodes[i].Addr, Err: err, Reason: reason(err), Latency: r.Latency})
	}
	return qe
}

// nodeLog rate-limits the log lines about nodes: one per node and kind a
// minute.
type nodeLog struct {
	mu   sync.Mutex
	last map[[2]int]time.Time // node, kind → last logged
}

// The kinds of nodeLog lines.
const (
	logSkipped = iota
	logRecovering
	logDegraded
	logMemory
	logRTTAtMax
	logSampleErr
)

func (nl *nodeLog) due(node, kind int, now time.Time) bool {
	nl.mu.Lock()
	defer nl.mu.Unlock()
	if nl.last == nil {
		nl.last = make(map[[2]int]time.Time)
	}
	k := [2]int{node, kind}
	if t, ok := nl.last[k]; ok && now.Sub(t) < time.Minute {
		return false
	}
	nl.last[k] = now
	return true
}

// logNodes logs the nodes of a round that are skipped or recovering.
func (e *engine) logNodes(ctx context.Context, nodes []NodeResult) {
	l := e.cfg.logger
	if l == nil {
		return
	}
	now := time.Now()
	for _, n := range nodes {
		kind := -1
		switch n.Reason {
		case "skipped":
			kind = logSkipped
		case "recovering":
			kind = logRecovering
		}
		if kind < 0 || !e.nodeLog.due(n.Node, kind, now) {
			continue
		}
		if kind == logSkipped {
			l.LogAttrs(ctx, slog.LevelWarn, "redlock: node skipped after repeated timeouts",
				slog.Int("node", n.Node), slog.String("addr", n.Addr))
		} else {
			l.LogAttrs(ctx, slog.LevelInfo, "redlock: node recovering after a restart or failover",
				slog.Int("node", n.Node), slog.String("addr", n.Addr), slog.String("reason", n.Err.Error()))
		}
	}
}

// breakerState is the state of the Client's circuit breaker; breaker.go
// drives it.
type breakerState struct {
	state atomic.Value // a string: breakerClosed, breakerOpen or breakerHalfOpen
	// closings counts the breaker's changes to closed: a degraded lock
	// records it when taken, and is not extended once it has moved, even
	// if the breaker has opened again since (degraded.go).
	closings atomic.Uint64

	mu        sync.Mutex
	changed   chan struct{} // closed at each change of state, then replaced
	stop      chan struct{} // closed by Close: the probe goroutine returns
	stopped   bool
	nextProbe time.Time     // when the next probe is due (open only)
	timeout   time.Duration // the per-node timeout of the probes
}

// The states of the circuit breaker (Client.BreakerState).
const (
	breakerClosed   = "closed"
	breakerOpen     = "open"
	breakerHalfOpen = "half_open"
)

// current is the breaker's state.
func (b *breakerState) current() string {
	if s, ok := b.state.Load().(string); ok {
		return s
	}
	return breakerClosed
}

// changedLocked returns the channel closed at the next change. b.mu must be
// held.
func (b *breakerState) changedLocked() chan struct{} {
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// setLocked moves the breaker to s and wakes the waiters. b.mu must be held.
func (b *breakerState) setLocked(s string) {
	if s == breakerClosed && b.current() != breakerClosed {
		b.closings.Add(1)
	}
	b.state.Store(s)
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// samplerState is the state of the adaptive TTL's sampler (sampler.go).
type samplerState struct {
	loop loop
	mu   sync.Mutex // guards the fields below
	// evicted is each node's evicted_keys at the last sample (-1: none
	// yet); warm is set once the sampler has read the node, whose first
	// read, with its dial, is no round trip.
	evicted []int64
	warm    []bool
}

// ambiguous reports whether a failed request may still have run on the
// node: anything but an error reply from Redis itself.
func ambiguous(err error) bool {
	return err != nil && !driver.IsReply(err)
}

// releaseAll releases locks in parallel, a bounded number at a time, so that
// Close with a frozen node takes a few node timeouts, not one per lock.
func releaseAll[L releaser](locks []L) {
	const parallel = 64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, l := range locks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = l.Release(context.Background())
		})
	}
	wg.Wait()
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// backoff yields the waits between the passes of one obtain (and the
// rounds of a manual Refresh): exponential
// growth from the minimum, capped at the maximum, with jitter above the
// minimum so that waiters spread out.
type backoff struct {
	cfg retryConfig
	n   uint
}

func newBackoff(cfg retryConfig) backoff { return backoff{cfg: cfg} }

// next is the n-th wait (from 0): the caller's strategy's (WithBackoff),
// or uniform in [min, min(max, min·2ⁿ⁺¹)]. ok is false when the strategy
// ends the retries.
func (b *backoff) next() (d time.Duration, ok bool) {
	if f := b.cfg.strategy; f != nil {
		d = f(int(b.n))
		b.n++
		return d, d >= 0
	}
	lo, hi := b.cfg.minDelay, b.cfg.maxDelay
	if b.n < 32 {
		if c := lo << (b.n + 1); c > 0 && c < hi {
			hi = c
		}
		b.n++
	}
	if hi <= lo {
		return lo, true
	}
	return lo + rand.N(hi-lo+1), true
}

// rule is the quorum rule of a lock of the spec sp: its quorum of the
// nodes, or in a joint configuration the kind's quorum of each set. Every
// round of a lock decides with it.
func (e *engine) rule(sp *spec) quorum.Rule {
	s := &e.sets
	if !s.joint() {
		return quorum.Count(sp.quorum(len(e.nodes)))
	}
	a, b := bits.OnesCount64(s.cur), bits.OnesCount64(s.next)
	return quorum.Joint(s.cur, sp.quorum(a), s.next, sp.quorum(b))
}
