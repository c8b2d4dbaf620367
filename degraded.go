package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"
)

// LeaseStore is the fallback of the degraded mode (WithDegradedMode): a
// table of leases, one per lock name, each with its owner, expiry and
// version. NewLocalLeases is one in this process's memory; the module
// github.com/redlock-go/redlock/redlocksql keeps one in SQLite or
// PostgreSQL. Implementations must be safe for concurrent use.
//
// A lease expires on its own at its expiry, on the store's clock. Writes
// must be idempotent: Acquire by the owner of a live lease extends it and
// returns the same version, so that a retried request cannot take a second
// lease. Versions of one name only increase, from one lease to the next,
// and lie in [1, 2⁶²): the lock's token is built from them (Lock.Token).
type LeaseStore interface {
	// Acquire takes the lease on name for owner, for ttl from now, when no
	// live lease of another owner exists. It returns Lease.Acquired false,
	// and the holder's remaining time, when one does.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)
	// Extend moves the expiry of owner's live lease of this version to ttl
	// from now. It returns false when the lease has expired, was released,
	// or belongs to another owner or version.
	Extend(ctx context.Context, name, owner string, version int64, ttl time.Duration) (bool, error)
	// Release ends owner's lease of this version, if it is still there.
	Release(ctx context.Context, name, owner string, version int64) error
}

// Lease is a LeaseStore's answer to Acquire.
type Lease struct {
	// Acquired is true when the lease is owner's.
	Acquired bool
	// Version is the lease's version when Acquired.
	Version int64
	// Remaining is the live lease's remaining time when not Acquired (-1
	// when not known).
	Remaining time.Duration
}

// MaxLeaseVersion bounds the versions of a LeaseStore: they lie in
// [1, MaxLeaseVersion).
const MaxLeaseVersion = 1 << 62

// DegradedTokenBase is the origin of degraded tokens: the token of a lock
// obtained in degraded mode is DegradedTokenBase + the lease's version, a
// negative number. Tokens from Redis are positive. So a fenced resource
// that refuses a token lower than one it has seen refuses every degraded
// holder once it has seen a lock from Redis, and orders the degraded
// holders of one shared store among themselves.
const DegradedTokenBase = math.MinInt64

// IsDegradedToken reports whether a fencing token comes from a lock
// obtained in degraded mode: whether it is negative.
func IsDegradedToken(token int64) bool { return token < 0 }

// WithDegradedMode installs store as the fallback of the circuit breaker:
// while the breaker is open (fewer than a quorum of nodes reachable; see
// WithBreaker), Obtain, TryObtain and Do take a lease in store instead of
// failing or waiting, and return a degraded lock (Lock.Degraded; Do's
// function sees it with IsDegraded). Without this option, which is the
// default, nothing changes: no lock is ever degraded.
//
// The degraded mode trades safety for availability, and docs/safety.md
// says exactly what is left: a degraded lock excludes only the other
// clients that fell back to the same store, not a client that still
// reaches a quorum of the nodes. Only plain locks fall back; the lock
// family (WithOwner, WithShared, WithExclusive) waits or fails as without
// the option.
//
// A degraded lock is refreshed (manually, or by WithAutoRefresh and Do)
// in the store until the breaker first closes after it was taken. From
// then on, even if the breaker opens again, it is not extended any more,
// nor moved to Redis: its refreshes fail with
// ErrDegraded, it runs out at its validity and is then lost (its Err wraps
// ErrLost and ErrDegraded), and its owner obtains the lock again, on the
// nodes.
func WithDegradedMode(store LeaseStore) Option {
	return clientOption(func(c *config) { c.fallback = store })
}

// ErrDegraded is the error of a refresh of a degraded lock after the
// circuit breaker closed: the lock is not extended, and runs out (see
// WithDegradedMode). The loss of such a lock wraps it too.
var ErrDegraded = errors.New("redlock: degraded lock not extended: the circuit breaker closed, obtain the lock again on the nodes")

// degradedLease is the part of a degraded lock that Redis locks lack.
type degradedLease struct {
	store   LeaseStore
	name    string // the lease's name in the store: prefix and lock name
	version int64
	// closings is the breaker's count of closings when the lock was taken:
	// once the count has moved, the lock is never extended again, even if
	// the breaker has opened again since.
	closings uint64
	// closed is set when a refresh found the breaker closed, or closed and
	// opened again, since the lock was taken; l.mu guards it.
	closed bool
}

// Degraded reports whether the lock was obtained in degraded mode, from the
// lease store of WithDegradedMode, and not from the nodes.
func (l *Lock) Degraded() bool { return l != nil && l.deg != nil }

type degradedKey struct{}

// IsDegraded reports whether ctx is the context of Do's (or DoAll's)
// function for a lock obtained in degraded mode.
func IsDegraded(ctx context.Context) bool {
	v, _ := ctx.Value(degradedKey{}).(bool)
	return v
}

// degradable reports whether an obtain falls back to the lease store while
// the breaker is open.
func (c *Client) degradable(o *obtainConfig) bool {
	return c.cfg.fallback != nil && o.kind == Plain
}

// attemptDegraded is an acquire attempt on the lease store, made instead of
// a round on the nodes while the breaker is open. The caller holds c.life
// for reading.
//
// closings is the breaker's count of closings read before the gate found
// it open: a closing since then ends the lock's extensions.
func (c *Client) attemptDegraded(ctx context.Context, name, key string, ttl, timeout time.Duration, o *obtainConfig, closings uint64) (*Lock, time.Duration, error) {
	store := c.cfg.fallback
	l := c.newLock(name, key, ttl, timeout, o)
	l.deg = &degradedLease{store: store, name: c.cfg.prefix + name, closings: closings}
	start := c.cfg.now()
	validUntil := start.Add(c.cfg.validity(ttl))
	// Like a round's requests, the store's is not abandoned when ctx ends,
	// so that its outcome is known.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	lease, err := store.Acquire(sctx, l.deg.name, l.value, ttl)
	cancel()
	holderTTL := time.Duration(-1)
	switch {
	case err != nil:
		// It may have taken effect: give it back.
		c.releaseLease(l.deg.name, l.value, 0, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode, circuit breaker open): lease store: %w: %w", ErrNotObtained, err)
	case !lease.Acquired:
		holderTTL = lease.Remaining
		left := ""
		if lease.Remaining >= 0 {
			left = " for another " + lease.Remaining.Round(time.Millisecond).String()
		}
		err = fmt.Errorf("redlock: obtain (degraded mode, circuit breaker open): the lease store says another owner holds it%s: %w (%w)", left, ErrNotObtained, ErrHeld)
	case lease.Version < 1 || lease.Version >= MaxLeaseVersion:
		c.releaseLease(l.deg.name, l.value, lease.Version, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode): the lease store returned version %d, outside [1, 2^62): %w", lease.Version, ErrNotObtained)
	case !c.cfg.now().Before(validUntil.Add(-timeout)):
		c.releaseLease(l.deg.name, l.value, lease.Version, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode): the lease store answered after the lock's validity: %w", ErrNotObtained)
	}
	if err != nil {
		if c.observed() {
			c.attemptedDegraded(ctx, l, o.id, start, err)
		}
		return nil, holderTTL, err
	}
	l.deg.version = lease.Version
	l.token = DegradedTokenBase + lease.Version
	l.obtained(start, validUntil, func(int) bool { return false })
	if c.observed() {
		c.attemptedDegraded(ctx, l, o.id, start, nil)
		if bh, ok := c.cfg.hook.(BreakerHook); ok {
			bh.Degraded(ctx, DegradedEvent{Key: name, ObtainID: o.id, Token: l.token, ValidUntil: validUntil})
		}
		if lg := c.cfg.logger; lg != nil && c.nodeLog.due(-1, logDegraded, time.Now()) {
			lg.LogAttrs(ctx, slog.LevelWarn, "redlock: degraded mode: lock obtained from the lease store, not from a quorum of nodes; it excludes only clients that fell back to the same store",
				slog.String("key", name), slog.Int64("token", l.token))
		}
	}
	if o.auto {
		l.keepAlive(start, o.interval, o.maxHold)
	}
	c.mu.Lock()
	c.held[l] = struct{}{}
	c.mu.Unlock()
	l.schedule()
	return l, 0, nil
}

// logDegraded is the nodeLog kind of the degraded mode's line (node -1).
const logDegraded = 2

// attemptedDegraded reports an attempt on the lease store to the hook: an
// AttemptEvent without nodes.
func (c *Client) attemptedDegraded(ctx context.Context, l *Lock, id uint64, start time.Time, err error) {
	if h := c.cfg.hook; h != nil {
		ev := AttemptEvent{Key: l.name, Kind: l.kind, ObtainID: id, Obtained: err == nil, Elapsed: c.cfg.now().Sub(start), Err: err}
		if err == nil {
			ev.Token = l.token
		}
		h.Attempt(ctx, ev)
	}
}

// releaseLease ends a lease in the store, bounded by timeout; version 0
// (not known) is looked up by the owner value, which is unique. Its error
// only matters to the caller of Release.
func (c *Client) releaseLease(name, owner string, version int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, minReleaseTimeout))
	defer cancel()
	return c.cfg.fallback.Release(ctx, name, owner, version)
}

// refreshDegraded is Refresh for a degraded lock: it extends the lease in
// the store while the breaker has not closed since the lock was taken. The caller holds l.op and
// c.life for reading, and has checked that the lock is still held.
func (l *Lock) refreshDegraded(ctx context.Context, start time.Time, ttl time.Duration, reason TTLReason, timeout time.Duration, auto bool) error {
	c := l.c
	newValid := start.Add(c.cfg.validity(ttl))
	l.mu.Lock()
	oldValid := l.validUntil
	l.mu.Unlock()
	var err error
	won, refused := false, false
	if c.BreakerState() == BreakerClosed || c.brk.closings.Load() != l.deg.closings {
		l.mu.Lock()
		l.deg.closed = true
		l.mu.Unlock()
		err = fmt.Errorf("redlock: refresh: %w; it runs out at its validity", ErrDegraded)
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		ok, serr := l.deg.store.Extend(sctx, l.deg.name, l.value, l.deg.version, ttl)
		cancel()
		switch {
		case serr != nil:
			err = fmt.Errorf("redlock: refresh (degraded mode): lease store: %w", serr)
		case !ok:
			refused = true
			err = fmt.Errorf("redlock: refresh (degraded mode): the lease store says the lease is gone or another owner's: %w", ErrNotHeld)
		case c.cfg.now().Before(minTime(oldValid, newValid)):
			won = true
		default:
			err = fmt.Errorf("redlock: refresh (degraded mode): the lease store answered after the lock's validity")
		}
	}
	if refused {
		l.end(fmt.Errorf("%w: the lease store says the degraded lock's lease is gone or another owner's", ErrLost))
	} else if aerr := l.applyRefresh(start, ttl, timeout, newValid, won, false, func(int) bool { return false }); aerr != nil {
		err = aerr
	}
	if h := c.cfg.hook; h != nil {
		h.Refresh(ctx, RefreshEvent{Key: l.name, Kind: l.kind, Token: l.token, Auto: auto, Elapsed: c.cfg.now().Sub(start), Err: err,
			TTL: ttl, TTLReason: reason})
	}
	return err
}

// refreshDegradedAuto is the keep-alive's refresh of a degraded lock; the
// caller holds l.op, which is unlocked here.
func (c *Client) refreshDegradedAuto(start time.Time, l *Lock, ttl time.Duration, reason TTLReason) {
	defer l.op.Unlock()
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return
	}
	_ = l.refreshDegraded(l.eventCtx(), start, ttl, reason, c.cfg.nodeTimeoutFor(ttl), true)
}

// releaseDegraded ends a degraded lock's lease in the store: Release's
// error.
func (l *Lock) releaseDegraded(timeout time.Duration) error {
	if err := l.c.releaseLease(l.deg.name, l.value, l.deg.version, timeout); err != nil {
		return fmt.Errorf("redlock: release (degraded mode): lease store: %w", err)
	}
	return nil
}

// LocalLeases is a LeaseStore in this process's memory (the seed's
// "LocalLock"): it excludes only the Clients of this process that share
// it. Versions start from the wall clock in milliseconds × 1024 and only
// increase, so that they keep increasing across restarts of the process
// while its clock does not go back. The zero value is not usable: call
// NewLocalLeases. It is safe for concurrent use.
type LocalLeases struct {
	mu     sync.Mutex
	leases map[string]localLease
	last   int64 // the last version given
	now    func() time.Time
	// pruneAt is the table size at which expired leases are next forgotten.
	pruneAt int
}

type localLease struct {
	owner   string
	version int64
	expiry  time.Time // on the monotonic clock
}

var _ LeaseStore = (*LocalLeases)(nil)

// NewLocalLeases returns an empty in-process lease table.
func NewLocalLeases() *LocalLeases {
	return &LocalLeases{leases: make(map[string]localLease), now: time.Now}
}

// Acquire implements LeaseStore.
func (s *LocalLeases) Acquire(_ context.Context, name, owner string, ttl time.Duration) (Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.prune(now)
	if cur, ok := s.leases[name]; ok && now.Before(cur.expiry) {
		if cur.owner != owner {
			return Lease{Remaining: cur.expiry.Sub(now)}, nil
		}
		cur.expiry = now.Add(ttl)
		s.leases[name] = cur
		return Lease{Acquired: true, Version: cur.version}, nil
	}
	s.last = max(s.last+1, now.UnixMilli()*1024)
	s.leases[name] = localLease{owner: owner, version: s.last, expiry: now.Add(ttl)}
	return Lease{Acquired: true, Version: s.last}, nil
}

// Extend implements LeaseStore.
func (s *LocalLeases) Extend(_ context.Context, name, owner string, version int64, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur, ok := s.leases[name]
	if !ok || cur.owner != owner || cur.version != version || !now.Before(cur.expiry) {
		return false, nil
	}
	cur.expiry = now.Add(ttl)
	s.leases[name] = cur
	return true, nil
}

// Release implements LeaseStore.
func (s *LocalLeases) Release(_ context.Context, name, owner string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.leases[name]; ok && cur.owner == owner && (version == 0 || cur.version == version) {
		delete(s.leases, name)
	}
	return nil
}

// prune forgets expired leases once the table has grown: versions come
// from s.last, so nothing is lost with them.
func (s *LocalLeases) prune(now time.Time) {
	if len(s.leases) < max(s.pruneAt, 1024) {
		return
	}
	for name, l := range s.leases {
		if !now.Before(l.expiry) {
			delete(s.leases, name)
		}
	}
	s.pruneAt = 2 * len(s.leases)
}

// degradedHeld reports whether what Do or DoAll holds is, or has, a
// degraded lock.
func degradedHeld(h held) bool {
	switch h := h.(type) {
	case *Lock:
		return h.Degraded()
	case *MultiLock:
		for _, l := range h.locks {
			if l.Degraded() {
				return true
			}
		}
	}
	return false
}
