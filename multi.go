package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxNames is the most lock names ObtainAll, TryObtainAll and DoAll take.
const MaxNames = 1024

// MultiLock is several locks obtained as one by ObtainAll, TryObtainAll or
// DoAll: one ordinary Lock per name, each with its own keys and fencing
// token. It is safe for concurrent use.
//
// It is held while every one of its locks is held: Done is closed when any
// of them ends, and Err then says which. The owner must call Release when
// done, which releases them all.
//
// A nil *MultiLock, which ObtainAll and TryObtainAll return with an error,
// is a lock not held, like a nil *Lock: Release, Refresh and Err return an
// error wrapping ErrNotHeld, Done returns a closed channel, and Locks,
// Token and ValidUntil return zero values.
type MultiLock struct {
	locks []*Lock // sorted by name, the order they were obtained in

	doneOnce sync.Once
	done     <-chan struct{}
}

// ObtainAll obtains the locks named names, each for ttl, as one lock: all
// or nothing. It sorts the names (bytewise) and obtains them one after the
// other in that order with the machinery of Obtain, waiting for each like
// Obtain (until ctx ends or the attempts of WithMaxAttempts, counted per
// name, are used up) while it holds the ones before it. Because every
// multi-name obtain takes its names in the same order, and a single-name
// waiter holds nothing, no two obtains can wait for each other in a cycle:
// see "Multi-name locks" in docs/lock-family.md.
//
// While it waits for a later name, the locks it already holds are kept
// alive by automatic refresh (WithRefreshInterval applies). Once all are
// obtained, the MultiLock keeps automatic refresh only if opts include
// WithAutoRefresh; otherwise it is turned off again and each lock runs out
// from its last refresh: ValidUntil, the earliest of the locks', may then
// be up to about a refresh interval (TTL/3 by default) short of ttl.
//
// The options apply to every name. Each name is an ordinary lock: it
// contends with Obtain on the same name, has its own fencing token, and the
// hooks see the events of each name as they would for Obtain.
//
// On any failure (a name not obtained, ctx ended, the Client closed, or a
// lock already held lost while waiting for a later one) it releases every
// lock it obtained and returns an error that names the name that failed
// and wraps the reason: errors.Is finds ErrNotObtained, ErrClosed, ctx's
// error, or, when a held lock was lost while waiting, both ErrNotObtained
// and ErrLost. It returns an error wrapping ErrInvalid, before any I/O, for
// no names, more than MaxNames, an empty or otherwise invalid name, a name
// given twice, or an option or TTL that Obtain would refuse.
//
// The caller must Release the returned lock.
func (c *Client) ObtainAll(ctx context.Context, names []string, ttl time.Duration, opts ...ObtainOption) (*MultiLock, error) {
	return c.obtainAll(ctx, names, ttl, opts, false)
}

// TryObtainAll makes one attempt to obtain each of the locks named names,
// in sorted order, with no waiting at all: it succeeds only if every name
// is obtained at its first attempt, and otherwise releases those it
// obtained and returns an error as ObtainAll does. WithMaxAttempts in opts
// is overridden.
//
// The caller must Release the returned lock.
func (c *Client) TryObtainAll(ctx context.Context, names []string, ttl time.Duration, opts ...ObtainOption) (*MultiLock, error) {
	return c.obtainAll(ctx, names, ttl, opts, true)
}

// DoAll is Do for several names: it obtains them like ObtainAll, keeps every
// one alive with automatic refresh, runs fn, and releases them all. fn's
// context is cancelled with cause ErrLost when any of the locks can no
// longer be guaranteed. It returns ObtainAll's error when the locks were not
// obtained (fn did not run), and otherwise fn's error, joined with an error
// wrapping ErrLost when a lock was lost while fn ran.
func (c *Client) DoAll(ctx context.Context, names []string, ttl time.Duration, fn func(context.Context) error, opts ...ObtainOption) error {
	if fn == nil {
		return invalid("nil function")
	}
	m, err := c.ObtainAll(ctx, names, ttl, append(opts[:len(opts):len(opts)], WithAutoRefresh())...)
	if err != nil {
		return err
	}
	return runHeld(ctx, m, fn)
}

func (c *Client) obtainAll(ctx context.Context, names []string, ttl time.Duration, opts []ObtainOption, try bool) (*MultiLock, error) {
	sorted, auto, err := c.checkAll(names, ttl, opts)
	if err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	if try {
		opts = append(opts[:len(opts):len(opts)], WithMaxAttempts(1))
	}
	// Every lock but the last is held while the next ones are waited
	// for: keep it alive meanwhile, and stop waiting when it ends.
	keep := opts
	if !auto && !try {
		keep = append(opts[:len(opts):len(opts)], WithAutoRefresh())
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	locks := make([]*Lock, 0, len(sorted))
	for i, name := range sorted {
		o := keep
		if i == len(sorted)-1 {
			o = opts
		}
		var l *Lock
		if try {
			l, err = c.TryObtain(wctx, name, ttl, o...)
		} else {
			l, err = c.Obtain(wctx, name, ttl, o...)
		}
		if err != nil {
			close(stop)
			watchers.Wait()
			releaseAll(locks)
			return nil, c.allFailed(ctx, wctx, name, err)
		}
		locks = append(locks, l)
		if !try && i < len(sorted)-1 {
			watchers.Go(func() {
				select {
				case <-l.Done():
					cancel(&lostWhileWaiting{name: name, err: l.Err()})
				case <-stop:
				}
			})
		}
	}
	close(stop)
	watchers.Wait()
	// A lock may have ended while the last one was obtained, unseen by
	// its watcher: the MultiLock would be born broken.
	for _, l := range locks {
		if lerr := l.Err(); lerr != nil {
			releaseAll(locks)
			if c.isClosed() {
				return nil, fmt.Errorf("redlock: obtain all: %w", ErrClosed)
			}
			return nil, fmt.Errorf("redlock: obtain all: lock %q ended while the others were obtained: %w", l.name, errors.Join(ErrNotObtained, lerr))
		}
	}
	if !auto && !try {
		for _, l := range locks[:len(locks)-1] {
			l.keepAliveOff()
		}
	}
	return &MultiLock{locks: locks}, nil
}

// allFailed is ObtainAll's error when the obtain of name failed with err;
// wctx is the context of that obtain, derived from ObtainAll's ctx and
// cancelled when a lock already held ended.
func (c *Client) allFailed(ctx, wctx context.Context, name string, err error) error {
	lost, _ := context.Cause(wctx).(*lostWhileWaiting)
	switch {
	case c.isClosed():
		// Close released the locks already held, which ended the wait.
		return fmt.Errorf("redlock: obtain all: %q: %w", name, ErrClosed)
	case lost != nil && ctx.Err() == nil:
		return fmt.Errorf("redlock: obtain all: lock %q ended while waiting for %q: %w", lost.name, name, errors.Join(ErrNotObtained, lost.err))
	}
	return fmt.Errorf("redlock: obtain all: %q: %w", name, err)
}

// lostWhileWaiting is the cause of the end of ObtainAll's wait when a lock
// it already held ended.
type lostWhileWaiting struct {
	name string
	err  error
}

func (e *lostWhileWaiting) Error() string {
	return fmt.Sprintf("lock %q ended: %v", e.name, e.err)
}

func (e *lostWhileWaiting) Unwrap() error { return e.err }

// checkAll validates ObtainAll's arguments before any I/O and returns the
// names sorted, and whether the options ask for automatic refresh.
func (c *Client) checkAll(names []string, ttl time.Duration, opts []ObtainOption) ([]string, bool, error) {
	if len(names) == 0 {
		return nil, false, invalid("no lock names given")
	}
	if len(names) > MaxNames {
		return nil, false, invalid("%d lock names given; at most %d", len(names), MaxNames)
	}
	for i, name := range names {
		if _, err := c.redisKey(name); err != nil {
			return nil, false, fmt.Errorf("redlock: obtain all: name %d (%q): %w", i, name, err)
		}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, false, invalid("lock name %q given more than once", sorted[i])
		}
	}
	// The options are the same for every name: refuse bad ones now, not
	// after the first names were obtained.
	o := obtainConfig{retry: c.cfg.retry}
	for _, opt := range opts {
		if opt == nil {
			return nil, false, invalid("nil obtain option")
		}
		opt.applyObtain(&o)
	}
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, false, err
	}
	if err := o.validate(ttl); err != nil {
		return nil, false, err
	}
	if err := c.checkAdaptiveInterval(&o); err != nil {
		return nil, false, err
	}
	return sorted, o.auto, nil
}

// keepAliveOff turns off the automatic refresh that ObtainAll turned on for
// its wait, when its caller did not ask for it; the lock runs out from its
// last refresh, and its loss deadline stays scheduled.
func (l *Lock) keepAliveOff() {
	l.mu.Lock()
	l.auto = false
	l.mu.Unlock()
	l.schedule()
}

// Locks returns the locks, one per name, sorted by name: the order in which
// they were obtained.
func (m *MultiLock) Locks() []*Lock {
	if m == nil {
		return nil
	}
	return slices.Clone(m.locks)
}

// Token returns the fencing token of the lock named name, or 0 if name is
// not one of the MultiLock's names. Each name has its own sequence of
// tokens (see Lock.Token).
func (m *MultiLock) Token(name string) int64 {
	if l := m.lock(name); l != nil {
		return l.Token()
	}
	return 0
}

func (m *MultiLock) lock(name string) *Lock {
	if m == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(m.locks, name, func(l *Lock, name string) int { return strings.Compare(l.name, name) })
	if !ok {
		return nil
	}
	return m.locks[i]
}

// ValidUntil returns the earliest ValidUntil of the locks: the time until
// which all of them are guaranteed to be held. Once any of them was
// released or lost, it is the zero time.
func (m *MultiLock) ValidUntil() time.Time {
	if m == nil {
		return time.Time{}
	}
	var until time.Time
	for i, l := range m.locks {
		v := l.ValidUntil()
		if v.IsZero() {
			return time.Time{}
		}
		if i == 0 || v.Before(until) {
			until = v
		}
	}
	return until
}

// Done returns a channel that is closed when any of the locks ends: lost
// or released (see Lock.Done). Err then says which.
func (m *MultiLock) Done() <-chan struct{} {
	if m == nil {
		return closedChan
	}
	m.doneOnce.Do(func() {
		if len(m.locks) == 1 {
			m.done = m.locks[0].Done()
			return
		}
		cases := make([]reflect.SelectCase, len(m.locks))
		for i, l := range m.locks {
			cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.Done())}
		}
		done := make(chan struct{})
		m.done = done
		// It ends with the first lock's end; Release and the Client's
		// Close end every lock.
		go func() {
			reflect.Select(cases)
			close(done)
		}()
	})
	return m.done
}

// Err returns nil while every lock is held. Once one has ended, it returns
// the error of the first such lock in name order (see Lock.Err: wrapping
// ErrLost if lost, ErrNotHeld after Release), prefixed with its name.
func (m *MultiLock) Err() error {
	if m == nil {
		return errNilLock
	}
	for _, l := range m.locks {
		if err := l.Err(); err != nil {
			return fmt.Errorf("lock %q: %w", l.name, err)
		}
	}
	return nil
}

// Refresh refreshes every lock to ttl from now, in parallel (see
// Lock.Refresh), and returns the errors of those that failed, joined, each
// prefixed with its lock's name. A lock whose refresh found it no longer
// ours has ended, and so has the MultiLock: Done is closed. It returns an
// error wrapping ErrInvalid, before any I/O, for a TTL that Lock.Refresh
// refuses.
func (m *MultiLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if m == nil {
		return errNilLock
	}
	if _, err := m.locks[0].c.cfg.checkTTL(ttl); err != nil {
		return err
	}
	return m.each(func(l *Lock) error { return l.Refresh(ctx, ttl) })
}

// Release releases every lock, in parallel (see Lock.Release), and returns
// the errors of those whose release failed, joined, each prefixed with its
// lock's name. Like Lock.Release it runs even when ctx is cancelled, and is
// idempotent. In every case no lock of the MultiLock is held afterwards.
func (m *MultiLock) Release(ctx context.Context) error {
	if m == nil {
		return errNilLock
	}
	return m.each(func(l *Lock) error { return l.Release(ctx) })
}

// bindDo binds every lock to DoAll (see Lock.bindDo).
func (m *MultiLock) bindDo(ctx context.Context, f func()) {
	for _, l := range m.locks {
		l.bindDo(ctx, f)
	}
}

// each runs f on every lock, a bounded number at a time (like releaseAll),
// and joins the errors, each prefixed with its lock's name.
func (m *MultiLock) each(f func(*Lock) error) error {
	errs := make([]error, len(m.locks))
	do := func(i int) {
		if err := f(m.locks[i]); err != nil {
			errs[i] = fmt.Errorf("lock %q: %w", m.locks[i].name, err)
		}
	}
	if len(m.locks) == 1 {
		do(0)
		return errs[0]
	}
	const parallel = 64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range m.locks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
