package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
)

// Lock is a lock obtained through a handle (or the Client's Obtain,
// TryObtain and Do). It is safe for concurrent use.
//
// A lock is held only until it can no longer be guaranteed: Done is closed
// and Err returns ErrLost at the loss deadline, ValidUntil less the per-node
// timeout (no refresh started later could finish in time), unless a refresh
// moves ValidUntil first. It is not safe to assume the lock is held after
// that, whatever the code did in between. The owner must call Release when
// done.
//
// A lock of several names (Client.All) is held while each of its Parts is:
// Done is closed when any of them ends, Refresh and Release act on every
// part, and Name and Token, which each part has of its own, are zero.
//
// A nil *Lock, which an obtain returns with an error, is a lock not held:
// Release, Refresh and Err return an error wrapping ErrNotHeld, Done returns
// a closed channel, and the other methods return zero values. So
// "defer lock.Release(ctx)" may come before the error is checked.
//
// A lock of one name is made of the parts below, each with its own file;
// a lock of several names has none of them: its public methods ask its
// allOf (all.go), which asks its parts.
type Lock struct {
	// all is the parts of a lock of several names (Client.All); nil for a
	// lock of one name.
	all *allOf
	e   *engine
	// The lock's name is not kept: it is read back from its key (Name).
	// sp is its handle's kind, label and prototype hold (kind.go), shared
	// by the handle's locks.
	sp   *spec
	keys lockKeys
	// secret is the kind's part of the lock: its value or hold.
	secret secret
	// quorum is which nodes must agree to each round of the lock: shared
	// by the locks of one rule (engine.sharedRule).
	quorum *quorum.Rule
	token  int64
	// lease is the lease of a lock obtained in degraded mode (degraded.go);
	// nil for a lock held on the nodes (nodeBackend). See backend.
	lease *leaseHold

	// op serializes the network operations on the lock (Refresh, Release,
	// automatic refresh), so that a refresh cannot re-seed a key that a
	// release just deleted.
	op sync.Mutex
	// mu guards the validity, the end, the keep-alive and the late
	// answers below, which a round changes together; each part's comment
	// says which of its methods expect it held. (Do's binding is read
	// without it: an atomic pointer.)
	mu sync.Mutex

	validity                             // validity.go: TTL, validity, per-node timeout
	ending                               // this file: Err, Done, Release's outcome
	keeper                               // keepalive.go: the schedule, automatic refresh
	eventOrder                           // eventorder.go: the order of the lock's events
	late       lateAnswers               // late.go: the acquire's late answers, Release's waits
	do         atomic.Pointer[doBinding] // do.go: Do's binding; nil outside Do
}

// ending is the end of a lock: why it ended, and its release.
type ending struct {
	err        error // nil while held; then ErrLost or ErrNotHeld
	releaseErr error
	// done is made by the first Done call (most locks are never watched),
	// and closed once err is set and a loss reported; it is closedChan once
	// the closing is over, so that a later Done gets a closed channel.
	done chan struct{}
	// releasing: Release's round is out, and late yes-replies clean up
	// after themselves (late.go); released: it is over.
	releasing, released bool
	// regAt is 1 + the lock's index in the registry that Close releases
	// (engine.go), 0 when it is not in it; the registry's mu guards it.
	regAt int32
}

// backend is where the lock is held: its lease, or the nodes.
func (l *Lock) backend() backend {
	if l.lease != nil {
		return l.lease
	}
	return nodeBackend{}
}

// backend is where a lock is held: the nodes (the lock's own rounds,
// nodeBackend), or the degraded mode's lease store (degraded.go).
type backend interface {
	// refresh extends the lock to ttl from start. The caller holds l.op
	// and e.life for reading, and has checked that the lock is held.
	refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error
	// refreshBatch refreshes locks of the keep-alive, all of this backend,
	// each with l.op held, and unlocks each.
	refreshBatch(start time.Time, plans []refreshPlan)
	// release gives the lock back; the caller holds l.op, and l has ended.
	release(ctx context.Context, l *Lock, timeout time.Duration, confirmed uint64) error
	// degraded is true for the lease store.
	degraded() bool
	// ranOut is why a lock that ran out could not be extended, beside its
	// validity: nil, or ErrDegraded.
	ranOut(l *Lock) error
}

// nodeBackend is the backend of a lock held on the nodes: its refresh
// (refresh.go) and release (release.go) rounds.
type nodeBackend struct{}

func (nodeBackend) degraded() bool     { return false }
func (nodeBackend) ranOut(*Lock) error { return nil }

// Name returns the lock's name: the name of its handle, or for Client.Any
// the name obtained. It is "" for a lock of several names (Client.All),
// whose Parts have their own.
func (l *Lock) Name() string {
	if l == nil || l.keys.key == "" {
		return ""
	}
	// Read back from its key (keys.Layout.Name), without a copy.
	return keys.Layout{Prefix: l.e.cfg.prefix}.Name(l.keys.key)
}

// Token returns the lock's fencing token: for a lock name, the token of
// each successful acquire is greater than that of every earlier successful
// acquire of the name, by any Client, across node restarts and failovers
// (under the assumptions of docs/fencing.md, and with the restart guard on).
// Pass it with every write to the resource the lock protects, and let the
// resource refuse a write whose token is lower than one it has seen: that
// stops a holder that lost its lock without knowing (a long pause) from
// writing after the next holder.
//
// A reentrant lock's re-entries keep their owner's token, and readers of a
// read-write lock are ordered against writers only (docs/lock-family.md);
// permits obtained at the same time may share one (docs/safety.md). The
// token of a lock obtained in degraded mode (Degraded) is negative, below
// every token from the nodes. A lock of several names (Client.All) has
// none: each of its Parts has its own.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// Parts returns the locks of a lock of several names (Client.All), one per
// name, sorted by name: the order in which they were obtained. It returns
// nil for a lock of one name. Release and Refresh the lock itself, not its
// parts.
func (l *Lock) Parts() []*Lock {
	if l == nil || l.all == nil {
		return nil
	}
	return slices.Clone(l.all.parts)
}

// Degraded reports whether the lock was obtained in degraded mode, from the
// lease store of WithDegradedMode, and not from the nodes (for a lock of
// several names: whether any part was).
func (l *Lock) Degraded() bool {
	switch {
	case l == nil:
		return false
	case l.all != nil:
		return l.all.degraded()
	}
	return l.backend().degraded()
}

// ValidUntil returns the time until which the lock is guaranteed to be held
// (on the monotonic clock of this process): the TTL from the moment the
// acquire or last successful refresh was sent, less the drift allowance. A
// refresh that failed may lower it (it may have shortened the keys on some
// nodes). After Release, or once the lock is lost, it is the zero time. For
// a lock of several names it is the earliest of its parts'.
func (l *Lock) ValidUntil() time.Time {
	switch {
	case l == nil:
		return time.Time{}
	case l.all != nil:
		return l.all.validUntil()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil()
}

// TTL returns the time to live used by the last acquire or refresh (for a
// lock of several names, the shortest of its parts'): the TTL given, or the
// one WithAdaptiveTTL picked.
func (l *Lock) TTL() time.Duration {
	switch {
	case l == nil:
		return 0
	case l.all != nil:
		return l.all.ttl()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Done returns a channel that is closed when the lock ends: when it is lost
// (a quorum could not be confirmed in time, or its validity ran out without
// a refresh) or released; for a lock of several names, when any part ends.
// Err then says which, and a loss has already been reported to the hook and
// the logger.
func (l *Lock) Done() <-chan struct{} {
	switch {
	case l == nil:
		return closedChan
	case l.all != nil:
		return l.all.done
	}
	l.mu.Lock()
	watch := !l.watched && l.err == nil
	l.watched = true
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	if watch {
		l.schedule()
	}
	return done
}

// closedChan is Done of a nil *Lock, and of a lock that had ended before
// Done was first called.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err returns nil while the lock is held; after it ends, an error wrapping
// ErrLost if it was lost or ran out, or ErrNotHeld after Release. For a
// lock of several names, the error of the first part in name order that
// ended, prefixed with its name.
func (l *Lock) Err() error {
	switch {
	case l == nil:
		return errNilLock
	case l.all != nil:
		return l.all.err()
	}
	l.mu.Lock()
	err, deadline := l.err, l.lossDeadline()
	l.mu.Unlock()
	if err == nil && !l.e.cfg.now().Before(deadline) {
		l.end(l.ranOut())
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
	}
	return err
}

// end moves the lock to its final state: Done is closed, Err returns err,
// ValidUntil is zero and the schedule forgets it. Only the first call
// counts.
func (l *Lock) end(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	l.setValidUntil(time.Time{})
	do := l.do.Load()
	l.mu.Unlock()
	// Done is closed last, so that whoever waits on it finds the loss
	// already reported to Do's function, the hook and the logger.
	defer func() {
		l.mu.Lock()
		done := l.done
		l.done = closedChan
		l.mu.Unlock()
		if done != nil {
			close(done)
		}
	}()
	l.e.sched.Cancel(&l.ka)
	if !errors.Is(err, ErrLost) {
		return
	}
	do.lost()
	l.reportLoss(err)
}

// Sequencer returns the lock's sequencer: its name, kind and fencing token
// together, which a resource stores to know which lock it follows, and
// which Client.Check asks the nodes about. Pass it, rather than the bare
// Token, to package fence's Redis, Table and Guard.
//
// The sequencer of a lock of several names (Client.All) is the zero
// Sequencer, which every fence refuses with fence.ErrInvalid: each of its
// Parts has a sequencer of its own. A nil *Lock's is the zero Sequencer
// too.
func (l *Lock) Sequencer() fence.Sequencer {
	if l == nil || l.all != nil || l.sp == nil {
		return fence.Sequencer{}
	}
	return fence.Sequencer{Lock: l.Name(), Kind: string(l.sp.label), Token: l.token}
}

// info is the lock's part of each of its events (LockInfo): the one place
// that fills the fields every lock event shares.
func (l *Lock) info() LockInfo {
	return LockInfo{Name: l.Name(), Kind: l.sp.label, LockID: l.id, Token: l.token}
}

// reportLoss reports the loss of the lock, which ended with err, to the
// hook and the logger.
func (l *Lock) reportLoss(err error) {
	e := l.e
	held := e.cfg.now().Sub(l.obtainedAt())
	ctx := l.do.Load().context()
	l.emit(&e.cfg, ctx, LostEvent{LockInfo: l.info(), Held: held, Err: err, Degraded: l.Degraded()})
	if lg := e.cfg.logger; lg != nil {
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: lock lost",
			slog.String("name", l.Name()), slog.Duration("held", held), slog.String("reason", err.Error()))
	}
}
