package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Lock is a lock obtained from a Client. It is safe for concurrent use.
//
// A lock is held only until ValidUntil, unless refreshed: it is not safe to
// assume the lock is still held after that, whatever the code did in
// between. The owner must call Release when done.
type Lock struct {
	c     *Client
	name  string
	key   string
	value string

	// op serializes the network operations on the lock (Refresh, Release),
	// so that a refresh cannot re-seed a key that a release just deleted.
	op sync.Mutex

	mu sync.Mutex
	// rounds holds the Done channels of acquire and refresh rounds whose
	// late replies may still set or extend our key on a node.
	rounds      []<-chan struct{}
	releasing   bool // Release's round is out: late yes-replies clean up after themselves
	ttl         time.Duration
	nodeTimeout time.Duration
	validUntil  time.Time
	lost        bool
	released    bool
	releaseErr  error
}

// Key returns the lock's name, as given to Obtain.
func (l *Lock) Key() string { return l.name }

// ValidUntil returns the time until which the lock is guaranteed to be held
// (on the monotonic clock of this process): the TTL from the moment the
// acquire or last successful refresh was sent, less the drift allowance. A
// refresh that failed may lower it (it may have shortened the keys on some
// nodes). After Release, or once the lock is known lost, it is the zero
// time.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// TTL returns the time to live used by the last acquire or refresh.
func (l *Lock) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Refresh extends the lock to ttl from now. It counts only if a quorum of
// nodes confirms before the current validity ends; the new validity is
// computed like an acquire's. A node that no longer has the key (it
// restarted, or expired it early) is re-seeded with the lock's value when it
// is free, which is safe because the lock is still valid on a quorum.
//
// It returns an error wrapping ErrNotHeld when the lock is no longer ours
// (validity over, released, or a quorum of nodes answered that the key is
// gone or another owner's), a *QuorumError without ErrNotHeld when nodes did
// not answer (the lock stays valid until ValidUntil), ErrClosed after the
// Client's Close, and ErrInvalid for a TTL below MinTTL.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := validTTL(ttl); err != nil {
		return err
	}
	c := l.c
	l.op.Lock()
	defer l.op.Unlock()
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return ErrClosed
	}
	l.mu.Lock()
	lost, released, validUntil := l.lost, l.released, l.validUntil
	l.mu.Unlock()
	if released {
		return fmt.Errorf("%w: it was released", ErrNotHeld)
	}
	if lost {
		return fmt.Errorf("%w: it was lost", ErrNotHeld)
	}
	start := c.cfg.now()
	if !start.Before(validUntil) {
		l.markLost()
		return fmt.Errorf("%w: its validity ran out %v ago", ErrNotHeld, start.Sub(validUntil))
	}
	timeout := c.cfg.nodeTimeoutFor(ttl)
	newValid := start.Add(ttl - c.cfg.driftFor(ttl))
	round := quorum.Round[script.RefreshResult]{
		Nodes:   c.nodes,
		Quorum:  c.quorum,
		Timeout: timeout,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.RefreshResult, error) {
			return script.Refresh(ctx, n.Client, l.key, l.value, ttl)
		},
		Agree:  func(r script.RefreshResult) bool { return r != script.NotOwner },
		Settle: l.settleLate,
		Valid: func() bool {
			now := c.cfg.now()
			return now.Before(validUntil) && now.Before(newValid)
		},
	}
	res := round.Run(ctx, &c.bg)
	l.mu.Lock()
	l.track(res.Done)
	if res.Won {
		l.validUntil, l.ttl, l.nodeTimeout = newValid, ttl, timeout
		l.mu.Unlock()
		return nil
	}
	// The refresh may have run on some nodes, and a shorter TTL there
	// makes their keys expire sooner: only the earlier of the two
	// validities is still guaranteed.
	if newValid.Before(l.validUntil) {
		l.validUntil = newValid
	}
	expired := !c.cfg.now().Before(l.validUntil)
	l.mu.Unlock()
	var sentinel error
	if expired || refused(c, res.Replies, func(r script.RefreshResult) bool { return r == script.NotOwner }) {
		l.markLost()
		sentinel = ErrNotHeld
	}
	qe := quorumError(c, "refresh", res, sentinel, func(script.RefreshResult) error { return ErrHeld })
	qe.Expired = res.Agreed >= c.quorum
	return qe
}

// Release deletes the lock on every node where it still holds our value.
// It runs even when ctx is already cancelled, bounded by the per-node
// timeout, and is idempotent: later calls return the first call's result.
//
// It returns nil when a quorum of nodes confirmed the deletion, an error
// wrapping ErrNotHeld (a *QuorumError) when the lock had already expired or
// been taken, and a *QuorumError without ErrNotHeld when nodes did not
// answer; in every case the lock is no longer held, and keys left on
// unreachable nodes expire with their TTL.
func (l *Lock) Release(ctx context.Context) error {
	c := l.c
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	if l.released {
		err := l.releaseErr
		l.mu.Unlock()
		return err
	}
	timeout := l.nodeTimeout
	rounds := l.rounds
	l.mu.Unlock()

	// Let the late replies of earlier rounds land first, so that the
	// release reaches every key they set. Those that arrive after the
	// release is sent see releasing and delete their key themselves.
	wait := time.NewTimer(timeout)
	for _, done := range rounds {
		select {
		case <-done:
			continue
		case <-wait.C:
		}
		break
	}
	wait.Stop()
	l.mu.Lock()
	l.releasing = true
	l.rounds = nil
	l.mu.Unlock()

	round := quorum.Round[bool]{
		Nodes:   c.nodes,
		Quorum:  c.quorum,
		Timeout: timeout,
		WaitAll: true,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			return script.Release(ctx, n.Client, l.key, l.value)
		},
		Agree: func(deleted bool) bool { return deleted },
	}
	res := round.Run(context.WithoutCancel(ctx), &c.bg)
	var err error
	if !res.Won {
		var sentinel error
		if refused(c, res.Replies, func(deleted bool) bool { return !deleted }) {
			sentinel = ErrNotHeld
		}
		err = quorumError(c, "release", res, sentinel, func(bool) error { return ErrNotHeld })
	}
	l.mu.Lock()
	l.released, l.releaseErr = true, err
	l.validUntil = time.Time{}
	l.mu.Unlock()
	c.forget(l)
	return err
}

// refused reports whether enough nodes answered "not ours" that a quorum
// can no longer agree: the lock is certainly not held.
func refused[T any](c *Client, replies []quorum.Reply[T], notOurs func(T) bool) bool {
	n := 0
	for _, r := range replies {
		if r.Err == nil && notOurs(r.Val) {
			n++
		}
	}
	return n > len(c.nodes)-c.quorum
}

// settleLate deletes our key on a node whose reply to an acquire or refresh
// of a won lock arrived after the lock's release was sent: the release may
// have passed that node before the key was set.
func (l *Lock) settleLate(n *quorum.Node, r script.RefreshResult, err error, won bool) {
	if l.isReleasing() && (r != script.NotOwner || ambiguous(err)) {
		l.c.releaseNode(n, l.key, l.value, l.nodeTimeoutNow())
	}
}

func (l *Lock) isReleasing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.releasing
}

func (l *Lock) nodeTimeoutNow() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodeTimeout
}

// track remembers a round whose late replies may still touch our key,
// forgetting those that are over. l.mu must be held.
func (l *Lock) track(done <-chan struct{}) {
	live := l.rounds[:0]
	for _, d := range l.rounds {
		select {
		case <-d:
		default:
			live = append(live, d)
		}
	}
	l.rounds = live
	select {
	case <-done:
	default:
		l.rounds = append(l.rounds, done)
	}
}

// markLost records that the lock can no longer be guaranteed.
func (l *Lock) markLost() {
	l.mu.Lock()
	l.lost = true
	l.validUntil = time.Time{}
	l.mu.Unlock()
}
