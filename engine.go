package redlock

import (
	"context"
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
)

// engine is a Client's machinery: the wiring its parts share (the
// settings, the nodes, the owner of every background goroutine, the
// registry of held locks that Close releases), and one part per concept,
// each a type with its own methods in its own file or internal package:
// the key layout (keyLayout, lockkeys.go), the keep-alive's schedule
// (internal/keepalive), the circuit breaker (circuit, breaker.go), the
// adaptive TTL's policy and sampler (adaptive.go; sampling, sampler.go),
// the local wait queues (waiting, waits.go), the node log (nodeLogger,
// nodelog.go), the configuration records (recorder, joint.go) and the
// servers' identities (identities, identity.go). The Client, the waiter
// and each lock work through it; it makes and registers the locks
// (newLock, adopt) and asks each lock's kind (kind.go) for its calls
// (docs/engine.md, "The engine's parts").
type engine struct {
	wiring
	// majority is the plain lock's quorum rule: N/2+1, or in a joint
	// configuration a majority of each set (joint.go).
	majority quorum.Rule
	sets     nodeSets  // the current and next node sets (joint.go)
	rec      recorder  // the configuration records (joint.go)
	layout   keyLayout // where a lock's keys are (lockkeys.go)
	// lastRule is the quorum rule of the last lock made (sharedRule).
	lastRule atomic.Pointer[quorum.Rule]

	// sched runs the keep-alive: automatic refreshes and loss deadlines;
	// its entries' values are *Lock. Its origin is the refresh grid's.
	sched *keepalive.Scheduler[*Lock]
	// origin is the scheduler's origin, from which each lock's validity
	// keeps its times (validity.origin points here).
	origin time.Time

	brk     circuit          // the circuit breaker (breaker.go)
	adapt   *adaptive.Policy // WithAdaptiveTTL; nil when off
	sampler sampling         // the adaptive TTL's sampler (sampler.go)
	waits   waiting          // the local wait queues and their subscriptions (waits.go)
	ident   identities       // what each node is, and its guard (identity.go)
}

// wiring is what the engine's parts share: the settings, the nodes, and
// the owner of the goroutines that outlive their call. Each part holds a
// pointer to its engine's.
type wiring struct {
	cfg   config
	nodes []*quorum.Node

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
	life sync.RWMutex
	reg  registry
	log  nodeLogger // log lines about the nodes, rate-limited
}

// registry is the Client's held locks, which Close releases, and whether
// it is closed. held is unordered: each lock knows its index in it
// (ending.regAt), so that it leaves in constant time, at 8 bytes a lock
// where a map took about 36.
type registry struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed when Close begins (close)
	done    chan struct{} // closed when Close has finished
	held    []*Lock
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
func (e *engine) init(nodes []driver.Node, cfg config, fire func(due []*keepalive.Entry[*Lock])) error {
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
	e.log.cfg = &e.cfg
	e.nodes = make([]*quorum.Node, len(nodes))
	e.majority = e.sets.rule(&plainSpec)
	e.reg.closing, e.reg.done = make(chan struct{}), make(chan struct{})
	e.layout.prefix, e.layout.plainNode = cfg.prefix, -1
	e.layout.epochKey = keys.Layout{Prefix: cfg.prefix}.NodeEpoch()
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
		e.nodes[i].OnErrorReply = e.ident.refused(i)
		e.layout.cluster = e.layout.cluster || info.Sharded
		if !info.Sharded && e.layout.plainNode < 0 {
			e.layout.plainNode = i
		}
	}
	e.ident.w, e.ident.sets = &e.wiring, &e.sets
	e.rec.w, e.rec.ident, e.rec.sets, e.rec.majority = &e.wiring, &e.ident, &e.sets, e.majority
	e.brk.w, e.brk.majority = &e.wiring, e.majority
	e.waits.w, e.waits.ident, e.waits.sets = &e.wiring, &e.ident, &e.sets
	e.ident.guards = make([]atomic.Pointer[script.Guard], len(e.nodes))
	for i := range e.nodes {
		g := e.ident.newGuard(i, e.layout.epochKey)
		e.ident.guards[i].Store(&g)
	}
	e.ident.fold = e.ident.foldable()
	if a := cfg.adaptive; a != nil {
		e.adapt = adaptive.New(adaptive.Settings{Min: a.Min, Max: a.Max, RTTMultiple: a.RTTMultiple,
			ContentionHalf: a.ContentionHalf, SampleInterval: a.SampleInterval})
		e.sampler.w, e.sampler.adapt = &e.wiring, e.adapt
		e.sampler.nodes.Init(len(e.nodes))
	}
	for _, n := range nodes {
		e.waits.hubs = append(e.waits.hubs, n.Notifier())
	}
	e.workers = quorum.NewWorkers(&e.bg, workerIdle)
	e.sched = keepalive.New(batchWindow, cfg.now, fire)
	e.origin = e.sched.Origin()
	return nil
}

// isClosed reports whether Close has begun.
func (r *registry) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// add adds a held lock to the registry that Close releases, once.
func (r *registry) add(l *Lock) {
	r.mu.Lock()
	if l.regAt == 0 {
		r.held = append(r.held, l)
		l.regAt = int32(len(r.held))
	}
	r.mu.Unlock()
}

// remove removes a released lock from the registry, if it is there: the
// last lock takes its place.
func (r *registry) remove(l *Lock) {
	r.mu.Lock()
	if i := int(l.regAt) - 1; i >= 0 {
		held := r.held
		last := held[len(held)-1]
		held[i], last.regAt = last, int32(i+1)
		held[len(held)-1] = nil
		r.held = held[:len(held)-1]
		l.regAt = 0
	}
	r.mu.Unlock()
}

// close marks the Client closed, and returns the locks it holds; first is
// false when it was closed already (then Close waits for reg.done).
func (r *registry) close() (held []releaser, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false
	}
	r.closed = true
	close(r.closing)
	held = make([]releaser, 0, len(r.held))
	for _, l := range r.held {
		held = append(held, l)
	}
	return held, true
}

// lockIDs and obtainIDs number the locks and the obtains that a hook or
// logger observes.
var lockIDs, obtainIDs atomic.Uint64

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
