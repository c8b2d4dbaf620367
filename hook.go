package redlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

// Hook observes what a Client does: every acquire attempt with each node's
// answer, waits, obtains, refreshes, releases and losses. Install one with
// WithHook; the adapters in the redlockprom and redlockotel modules are
// hooks. Methods are called on the goroutine doing the work, after it: they
// must be fast and must not block. Embed BaseHook to implement only some.
//
// ctx is the context of the call the event belongs to, so that a tracing
// hook can make its spans children of the caller's: that of Obtain,
// TryObtain or Do for Attempt, Wait and Obtain, that of Refresh or Release
// for theirs. Automatic refreshes and losses belong to no call: their ctx
// is that of Do (without its cancellation) for a lock of Do, and
// context.Background() otherwise. A hook must not keep ctx.
//
// With no hook installed, the Client builds no events and allocates nothing
// for them.
//
// A Hook that also implements BreakerHook (BaseHook does) hears of the
// circuit breaker's changes and of locks obtained in degraded mode.
type Hook interface {
	// Attempt is called after each acquire attempt: each acquire round
	// on every node, the attempts that WithMaxAttempts counts.
	Attempt(context.Context, AttemptEvent)
	// Wait is called after each wait between two attempts of Obtain, and
	// after a wait for its turn among the Client's waiters for the lock.
	Wait(context.Context, WaitEvent)
	// Obtain is called when Obtain, TryObtain or Do's obtain returns.
	Obtain(context.Context, ObtainEvent)
	// Refresh is called after each refresh, manual or automatic.
	Refresh(context.Context, RefreshEvent)
	// Release is called after each Release.
	Release(context.Context, ReleaseEvent)
	// Lost is called when a held lock is lost.
	Lost(context.Context, LostEvent)
}

// BaseHook implements Hook with methods that do nothing; embed it in a hook
// that observes only some events.
type BaseHook struct{}

// Attempt does nothing.
func (BaseHook) Attempt(context.Context, AttemptEvent) {}

// Wait does nothing.
func (BaseHook) Wait(context.Context, WaitEvent) {}

// Obtain does nothing.
func (BaseHook) Obtain(context.Context, ObtainEvent) {}

// Refresh does nothing.
func (BaseHook) Refresh(context.Context, RefreshEvent) {}

// Release does nothing.
func (BaseHook) Release(context.Context, ReleaseEvent) {}

// Lost does nothing.
func (BaseHook) Lost(context.Context, LostEvent) {}

// NodeResult is one node's part in a quorum operation.
type NodeResult struct {
	Node int    // index in the slice given to New
	Addr string // for humans
	// Err is nil when the node agreed; otherwise its reason, as in
	// NodeError (ErrHeld, *RecoveringError, ErrNodeTimeout, …).
	Err error
	// Latency is how long the node took to answer; 0 when it had not
	// answered by the decision.
	Latency time.Duration
}

// AttemptEvent describes one acquire attempt: one acquire round on every
// node. The read of the key that a waiter makes after it subscribes to
// release notifications is no attempt, and is not reported.
type AttemptEvent struct {
	// Key is the lock's name, as given to Obtain.
	Key string
	// Kind is the lock's kind: plain, reentrant, write or read.
	Kind Kind
	// ObtainID is that of the obtain the attempt belongs to (ObtainEvent).
	ObtainID uint64
	// Obtained is true when a quorum agreed in time: the lock is ours.
	Obtained bool
	// Elapsed is how long the attempt took, its second round included.
	Elapsed time.Duration
	// Nodes holds each node's answer to the acquire round, in node order.
	Nodes []NodeResult
	// Token is the lock's fencing token when obtained, 0 otherwise.
	Token int64
	// SecondRound is true when the yes-votes disagreed on the token and a
	// second round raised the counters.
	SecondRound bool
	// Err is nil when obtained; otherwise a *QuorumError with each node's
	// reason (errors.Is matches ErrHeld when a node has another owner).
	Err error
}

// WakeReason says what ended a wait between attempts.
type WakeReason int

const (
	WokenByRelease WakeReason = iota // a release notification, or the key found gone after subscribing
	WokenByTimer                     // the backoff or the holder's remaining TTL
	WokenByContext                   // the caller's context ended
	WokenByTurn                      // a waiter ahead in this Client's queue left
)

// String returns the reason as a word: "release", "timer", "context",
// "turn", or "unknown".
func (r WakeReason) String() string {
	switch r {
	case WokenByRelease:
		return "release"
	case WokenByTimer:
		return "timer"
	case WokenByContext:
		return "context"
	case WokenByTurn:
		return "turn"
	}
	return "unknown"
}

// WaitEvent describes one wait between attempts.
type WaitEvent struct {
	// Key is the lock's name, as given to Obtain; for ObtainAny, which
	// waits on all its names at once, the first of them.
	Key string
	// ObtainID is that of the obtain the wait belongs to (ObtainEvent).
	ObtainID uint64
	// Waited is how long the wait lasted.
	Waited time.Duration
	// WokenBy says what ended it.
	WokenBy WakeReason
}

// ObtainEvent describes one call of Obtain or TryObtain (or of ObtainAny
// or TryObtainAny).
type ObtainEvent struct {
	// Key is the lock's name, as given to Obtain. For ObtainAny it is the
	// name obtained, or, when none was, the first of the names given.
	Key string
	// Kind is the lock's kind: plain, reentrant, write or read.
	Kind Kind
	// ObtainID identifies the call, unique in the process: the attempts and
	// waits of the call, reported before it, carry the same ObtainID.
	ObtainID uint64
	// Attempts is the number of acquire attempts the call made: its
	// AttemptEvents, the attempts that WithMaxAttempts bounds. It is 0
	// when the call's context ended before its first.
	Attempts int
	// Elapsed is how long the call took, waits included.
	Elapsed time.Duration
	// Token is the lock's fencing token when obtained, 0 otherwise.
	Token int64
	// TTL is the TTL of the call's last attempt: the lock's when
	// obtained. TTLReason says why it has that value (WithAdaptiveTTL). 0
	// when the call made no attempt.
	TTL       time.Duration
	TTLReason TTLReason
	// Err is the call's error: nil when the lock was obtained.
	Err error
}

// RefreshEvent describes one refresh.
type RefreshEvent struct {
	Key string // the lock's name, as given to Obtain
	// Kind is the lock's kind: plain, reentrant, write or read.
	Kind    Kind
	Token   int64         // the lock's fencing token: it identifies the lock
	Auto    bool          // by the keep-alive, not a call of Refresh
	Elapsed time.Duration // the refresh's round
	Err     error         // Refresh's error: nil when a quorum confirmed in time
	// TTL is the TTL the refresh asked for, and TTLReason why
	// (WithAdaptiveTTL picks it anew for each refresh).
	TTL       time.Duration
	TTLReason TTLReason
}

// ReleaseEvent describes one Release.
type ReleaseEvent struct {
	Key string // the lock's name, as given to Obtain
	// Kind is the lock's kind: plain, reentrant, write or read.
	Kind    Kind
	Token   int64         // the lock's fencing token: it identifies the lock
	Held    time.Duration // from the acquire to the end of the release
	Elapsed time.Duration // the release itself
	Err     error         // Release's error: nil when a quorum deleted the key
}

// LostEvent describes a lock lost while held. A lost lock is still
// released by its owner (or Close) later, which reports a ReleaseEvent with
// the same Token.
type LostEvent struct {
	Key string // the lock's name, as given to Obtain
	// Kind is the lock's kind: plain, reentrant, write or read.
	Kind  Kind
	Token int64         // the lock's fencing token: it identifies the lock
	Held  time.Duration // from the acquire to the loss
	Err   error         // why it was lost; it wraps ErrLost
}

// JoinHooks returns a Hook that passes every event to each of hooks in
// turn: to install, say, both the Prometheus and the OpenTelemetry adapter.
func JoinHooks(hooks ...Hook) Hook { return joined(hooks) }

type joined []Hook

// each passes an event to every hook of j in turn; call is the Hook method
// of the event (Hook.Attempt, …).
func each[E any](j joined, ctx context.Context, e E, call func(Hook, context.Context, E)) {
	for _, h := range j {
		call(h, ctx, e)
	}
}

func (j joined) Attempt(ctx context.Context, e AttemptEvent) { each(j, ctx, e, Hook.Attempt) }
func (j joined) Wait(ctx context.Context, e WaitEvent)       { each(j, ctx, e, Hook.Wait) }
func (j joined) Obtain(ctx context.Context, e ObtainEvent)   { each(j, ctx, e, Hook.Obtain) }
func (j joined) Refresh(ctx context.Context, e RefreshEvent) { each(j, ctx, e, Hook.Refresh) }
func (j joined) Release(ctx context.Context, e ReleaseEvent) { each(j, ctx, e, Hook.Release) }
func (j joined) Lost(ctx context.Context, e LostEvent)       { each(j, ctx, e, Hook.Lost) }

// WithHook installs a hook (JoinHooks installs several). Default none.
func WithHook(h Hook) Option {
	return clientOption(func(c *config) { c.hook = h })
}

// WithLogger logs what an operator must see: a lock lost, a node skipped
// after repeated timeouts, a node recovering after a restart. Each node's
// condition is logged at most once a minute. Default none: the Client logs
// nothing.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *config) { c.logger = l })
}

// nodeResults turns a round's replies into NodeResults.
func nodeResults[T any](c *Client, res quorum.Result[T], disagree func(T) error) []NodeResult {
	out := make([]NodeResult, len(res.Replies))
	for i, r := range res.Replies {
		err := r.Err
		if err == nil && !r.Yes {
			err = disagree(r.Val)
		}
		out[i] = NodeResult{Node: i, Addr: c.nodes[i].Addr, Err: err, Latency: r.Latency}
	}
	return out
}

// obtainIDs numbers the obtains that a hook or logger observes.
var obtainIDs atomic.Uint64

// observed is true when anything watches the Client.
func (c *Client) observed() bool { return c.cfg.hook != nil || c.cfg.logger != nil }

// nodeLog rate-limits the log lines about nodes: one per node and kind a
// minute.
type nodeLog struct {
	mu   sync.Mutex
	last map[[2]int]time.Time // node, kind → last logged
}

const (
	logSkipped = iota
	logRecovering
)

// logNodes logs the nodes of a round that are skipped or recovering.
func (c *Client) logNodes(ctx context.Context, nodes []NodeResult) {
	l := c.cfg.logger
	if l == nil {
		return
	}
	now := time.Now()
	for _, n := range nodes {
		kind := -1
		switch {
		case errors.Is(n.Err, ErrNodeSkipped):
			kind = logSkipped
		case errors.Is(n.Err, ErrNodeRecovering):
			kind = logRecovering
		}
		if kind < 0 || !c.nodeLog.due(n.Node, kind, now) {
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
