package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// Hook observes what a Client does: every acquire attempt with each node's
// answer, waits, obtains, refreshes, releases, losses, the circuit
// breaker's changes and the adaptive TTL's samples. Install one with
// WithHook; the adapters in the redlockprom and redlockotel modules are
// hooks.
//
// Observe receives every event, one of the types that implement Event
// (AttemptEvent, WaitEvent, ObtainEvent, RefreshEvent, ReleaseEvent,
// LostEvent, BreakerEvent, SampleEvent): a hook switches on the type and
// ignores the events it does not need, so that a new kind of event never
// changes the interface. Observe is called on the goroutine doing the work,
// after it: it must be fast and must not block (so it must not obtain,
// refresh or release locks itself).
//
// The events of one lock (one LockID) come in order: its ObtainEvent
// first, then its RefreshEvents, then at most one LostEvent, then at most
// one ReleaseEvent, which says whether the lock was lost before (Lost). A
// loss found by the keep-alive, or a Close that releases the lock, can
// happen before the obtain that returns the lock has reported it: its
// event then waits for the ObtainEvent. So a hook counts the locks held
// with no state of its own: one more at an ObtainEvent with a LockID, one
// fewer at a LostEvent, or at a ReleaseEvent that is not Lost. A lock that
// an obtain gave back before returning it (its second round failed) has
// no events of its own; its AttemptEvent reports the failure.
//
// ctx is the context of the call the event belongs to, so that a tracing
// hook can make its spans children of the caller's: that of the obtain for
// AttemptEvent, WaitEvent and ObtainEvent, that of Refresh or Release for
// theirs. Events that belong to no call (automatic refreshes, losses,
// breaker changes, samples) carry the context of Do (without its
// cancellation) for a lock of Do, and context.Background() otherwise. A hook
// must not keep ctx.
//
// With no hook installed, the Client builds no events and allocates nothing
// for them.
//
// A hook that panics does not stop the Client, on any goroutine: the
// caller's (an obtain, Refresh, Release) and the Client's own (the
// keep-alive, the circuit breaker's probe, the adaptive TTL's sampler)
// alike. The panic is recovered where Observe returns, the event is
// dropped for that hook, and the work goes on as if Observe had returned:
// a lock's state, its refreshes and its release are unaffected, an obtain
// that won returns its lock, and the lock's later events still come. Each
// hook that JoinHooks joins gets the event even when one before it
// panicked. The Client reports panics through its logger (WithLogger), at
// level Error with the panic's value, the event's type and the stack: the
// first one, then at most one a minute with the number of panics since.
// Without a logger nothing reports them. A panic is a bug in the hook; it
// is never a way to stop the Client.
type Hook interface {
	Observe(ctx context.Context, e Event)
}

// Event is one of AttemptEvent, WaitEvent, ObtainEvent, RefreshEvent,
// ReleaseEvent, LostEvent, BreakerEvent and SampleEvent.
type Event interface {
	event()
}

func (AttemptEvent) event() {}
func (WaitEvent) event()    {}
func (ObtainEvent) event()  {}
func (RefreshEvent) event() {}
func (ReleaseEvent) event() {}
func (LostEvent) event()    {}
func (BreakerEvent) event() {}
func (SampleEvent) event()  {}

// JoinHooks returns a Hook that passes every event to each of hooks in
// turn: to install, say, both the Prometheus and the OpenTelemetry adapter.
// A hook that panics does not keep the event from the hooks after it (see
// Hook). New refuses, with ErrInvalid, a joined hook that is nil.
func JoinHooks(hooks ...Hook) Hook { return joined(slices.Clone(hooks)) }

type joined []Hook

// Observe passes e to every hook, even after one panicked; the first panic
// is raised again once all have seen e, for the Client's guard to report.
func (j joined) Observe(ctx context.Context, e Event) {
	var first *hookPanic
	for _, h := range j {
		if p := observe(ctx, h, e); p != nil && first == nil {
			first = p
		}
	}
	if first != nil {
		panic(first)
	}
}

// hookPanic is a panic recovered from a hook, with the stack where it was
// raised.
type hookPanic struct {
	value any
	stack []byte
}

// observe calls h.Observe and returns its panic, if any.
func observe(ctx context.Context, h Hook, e Event) (p *hookPanic) {
	defer func() {
		if v := recover(); v != nil {
			if hp, ok := v.(*hookPanic); ok {
				p = hp // from a hook that JoinHooks joined
			} else {
				p = &hookPanic{value: v, stack: debug.Stack()}
			}
		}
	}()
	h.Observe(ctx, e)
	return nil
}

// guardedHook is the hook a Client calls: the one of WithHook, with its
// panics recovered and reported (see Hook).
type guardedHook struct {
	h      Hook
	logger *slog.Logger
	now    func() time.Time // the Client's clock

	mu      sync.Mutex
	logged  time.Time // when the last panic was logged
	unseen  int       // panics since, not logged
	everLog bool
}

func (g *guardedHook) Observe(ctx context.Context, e Event) {
	if p := observe(ctx, g.h, e); p != nil {
		g.report(ctx, e, p)
	}
}

// report logs a hook's panic: the first, then at most one a minute.
func (g *guardedHook) report(ctx context.Context, e Event, p *hookPanic) {
	if g.logger == nil {
		return
	}
	now := g.now()
	g.mu.Lock()
	if g.everLog && now.Sub(g.logged) < time.Minute {
		g.unseen++
		g.mu.Unlock()
		return
	}
	before := g.unseen
	g.everLog, g.logged, g.unseen = true, now, 0
	g.mu.Unlock()
	g.logger.LogAttrs(ctx, slog.LevelError, "redlock: the hook panicked; the event was dropped and the Client goes on",
		slog.String("panic", fmt.Sprint(p.value)), slog.String("event", fmt.Sprintf("%T", e)),
		slog.Int("panics_not_logged_before", before), slog.String("stack", string(p.stack)))
}

// NodeResult is one node's part in a round: an acquire attempt's
// (AttemptEvent), or the reason of a node that did not agree (QuorumError).
type NodeResult struct {
	Node int    // index in the slice given to New
	Addr string // for humans
	// Err is nil when the node agreed; otherwise its reason: ErrHeld,
	// ErrNotOwner, ErrWrongKind, ErrNodeRecovering, ErrNotReplicated,
	// ErrNodeTimeout, ErrNodePending, ErrNodeSkipped, or the error of the
	// Redis client.
	Err error
	// Reason is Err as a short, stable label: "" when the node agreed,
	// else ReasonHeld, ReasonNotOwner, ReasonWrongKind, ReasonRecovering,
	// ReasonNotReplicated, ReasonTimeout, ReasonPending, ReasonSkipped, or
	// ReasonError for any other failure.
	Reason Reason
	// Latency is how long the node took to answer; 0 when it had not
	// answered by the decision.
	Latency time.Duration
}

// AttemptEvent describes one acquire attempt: one acquire round on every
// node (or, in degraded mode, one request to the lease store), the attempts
// that WithMaxAttempts counts. The read of the keys that a waiter makes
// after it subscribes to release notifications is no attempt.
type AttemptEvent struct {
	// Name is the lock's name.
	Name string
	// Kind is the lock's kind (Kinds).
	Kind Kind
	// ObtainID is that of the obtain the attempt belongs to (ObtainEvent).
	ObtainID uint64
	// Obtained is true when a quorum agreed in time: the lock is ours.
	Obtained bool
	// Degraded is true for an attempt on the degraded mode's lease store
	// (WithDegradedMode), made while the circuit breaker was open.
	Degraded bool
	// Elapsed is how long the attempt took, its second round included.
	Elapsed time.Duration
	// Nodes holds each node's answer to the acquire round, in node order
	// (none for an attempt in degraded mode).
	Nodes []NodeResult
	// Token is the lock's fencing token when obtained, 0 otherwise.
	Token int64
	// SecondRound is true when the yes-votes disagreed on the token and a
	// second round raised the counters.
	SecondRound bool
	// Err is nil when obtained; otherwise a *QuorumError with each node's
	// reason (errors.Is matches ErrHeld when a node has another owner).
	Err error
	// Result is the outcome as a label: ResultObtained, ResultHeld
	// (another owner has the lock), ResultNoQuorum, or ResultError.
	Result Result
}

// WaitEvent describes one wait of an obtain: between two attempts, or for
// its turn among the Client's waiters for the lock.
type WaitEvent struct {
	// Name is the lock's name; for Client.Any, which waits on all its
	// names at once, the first of them.
	Name string
	// ObtainID is that of the obtain the wait belongs to (ObtainEvent).
	ObtainID uint64
	// Waited is how long the wait lasted.
	Waited time.Duration
	// WokenBy says what ended it: WokenByRelease (a release
	// notification, or the key found gone after subscribing),
	// WokenByTimer (the backoff or the holder's remaining TTL),
	// WokenByContext (the caller's context ended), or WokenByTurn (a
	// waiter ahead in this Client's queue left).
	WokenBy WokenBy
}

// LockInfo is what every event of one lock says of the lock: the
// ObtainEvent that obtained it, its RefreshEvents, its LostEvent and its
// ReleaseEvent embed it, so that e.Name, e.Kind, e.LockID and e.Token
// read the same on each.
type LockInfo struct {
	// Name is the lock's name. For Client.Any it is the name obtained,
	// or, in an ObtainEvent that obtained none, the first of the names
	// given.
	Name string
	// Kind is the lock's kind (Kinds).
	Kind Kind
	// LockID identifies the lock, unique in the process: its ObtainEvent,
	// RefreshEvents, ReleaseEvent and LostEvent carry the same LockID. 0
	// in an ObtainEvent that obtained none.
	LockID uint64
	// Token is the lock's fencing token; 0 in an ObtainEvent that
	// obtained none.
	Token int64
}

// ObtainEvent describes one call of Obtain or TryObtain (or Do's obtain),
// on any handle. Its LockInfo is the lock's when one was obtained, else
// the name and kind asked for.
type ObtainEvent struct {
	LockInfo
	// ObtainID identifies the call, unique in the process: the attempts and
	// waits of the call, reported before it, carry the same ObtainID.
	ObtainID uint64
	// Attempts is the number of acquire attempts the call made: its
	// AttemptEvents, the attempts that WithMaxAttempts bounds. It is 0
	// when the call's context ended before its first.
	Attempts int
	// Elapsed is how long the call took, waits included.
	Elapsed time.Duration
	// Degraded is true for a lock obtained in degraded mode, from the
	// lease store of WithDegradedMode: it excludes only the clients that
	// fell back to the same store (docs/safety.md, section 7).
	Degraded bool
	// TTL is the TTL of the call's last attempt: the lock's when
	// obtained. TTLReason says why it has that value: "given" (no adaptive
	// TTL), "base" (the adaptive TTL left it as given), "contention",
	// "rtt", "min", "max" or "hold_limit" (see WithAdaptiveTTL). 0 and ""
	// when the call made no attempt.
	TTL       time.Duration
	TTLReason string
	// Err is the call's error: nil when the lock was obtained.
	Err error
	// Result is the outcome as a label: ResultObtained, ResultClosed (the
	// Client was closed), ResultHeld, ResultBreakerOpen (refused, or still
	// waiting when its context ended, because the circuit breaker was
	// open), ResultCanceled (its context ended first), ResultNoQuorum, or
	// ResultError.
	Result Result
}

// RefreshEvent describes one refresh, manual or automatic.
type RefreshEvent struct {
	LockInfo
	Auto    bool          // by the keep-alive, not a call of Refresh
	Elapsed time.Duration // the refresh's round
	Err     error         // Refresh's error: nil when a quorum confirmed in time
	// TTL is the TTL the refresh asked for, and TTLReason why (see
	// ObtainEvent.TTLReason).
	TTL       time.Duration
	TTLReason string
	// Result is the outcome as a label: ResultOK, ResultNotHeld (the lock
	// is no longer this owner's), ResultClosed, or ResultFailed.
	Result Result
}

// ReleaseEvent describes one Release.
type ReleaseEvent struct {
	LockInfo
	Held    time.Duration // from the acquire to the end of the release
	Elapsed time.Duration // the release itself
	Err     error         // Release's error: nil when a quorum deleted the key
	// Result is the outcome as a label: ResultOK, ResultNotHeld,
	// ResultFailed, or ResultHandedOff for a lock this process handed to
	// another (Lock.Handoff), which it no longer holds and did not release.
	Result Result
	// Lost is true when the lock was lost before the release: its
	// LostEvent came first, and the hold ended then.
	Lost bool
	// Degraded is the lock's ObtainEvent.Degraded.
	Degraded bool
}

// LostEvent describes a lock lost while held. A lost lock is still released
// by its owner (or Close) later, which reports a ReleaseEvent with the same
// LockID, always after the LostEvent.
type LostEvent struct {
	LockInfo
	Held     time.Duration // from the acquire to the loss
	Err      error         // why it was lost; it wraps ErrLost
	Degraded bool          // the lock's ObtainEvent.Degraded
}

// BreakerEvent describes a change of the circuit breaker's state (see
// WithBreaker and Client.BreakerState).
type BreakerEvent struct {
	// From and To are the states before and after: BreakerClosed,
	// BreakerOpen or BreakerHalfOpen.
	From, To BreakerState
	// Reachable is how many nodes the breaker counted as reachable, of the
	// Need that a quorum takes.
	Reachable, Need int
	// Err, when the breaker opened, says why: a *QuorumError that matches
	// ErrBreakerOpen and names each unreachable node.
	Err error
}

// SampleEvent is one node's sample of WithAdaptiveTTL's sampler, which
// reads INFO from every node every AdaptiveTTL.SampleInterval: one event
// per node and sample.
type SampleEvent struct {
	Node int    // index in the slice given to New
	Addr string // for humans
	// RTT is the p95 of the nodes' round-trip times over the last minute
	// (acquire and refresh rounds, and the sampler's INFO); 0 when none.
	RTT time.Duration
	// UsedMemory and MaxMemory are INFO's used_memory and maxmemory, in
	// bytes (on a Redis Cluster, the fullest master's); MaxMemory is 0
	// when the node has no limit.
	UsedMemory, MaxMemory int64
	// Policy is the node's maxmemory-policy.
	Policy string
	// Evicted is how many keys the node evicted since the previous sample
	// (on a Redis Cluster, all masters together).
	Evicted int64
	// Pressure is empty when the node is fine, and otherwise says what is
	// wrong: keys evicted, or memory at AdaptiveTTL.MemoryRatio of
	// maxmemory. An evicted lock key breaks mutual exclusion like a node
	// that restarts without its data; no TTL prevents it.
	Pressure string
	// Err is the error of the node's INFO; the memory fields are then
	// zero.
	Err error
}
