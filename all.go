package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// obtainAll obtains the plain locks named names as one lock, all or
// nothing (Client.All): it sorts the names and obtains them one after the
// other in that order with the machinery of a single name's obtain,
// waiting for each while it holds the ones before it, which it keeps alive
// meanwhile. Because every multi-name obtain takes its names in the same
// order, and a single-name waiter holds nothing, no two obtains can wait
// for each other in a cycle (docs/lock-family.md, "Multi-name locks").
func (e *engine) obtainAll(ctx context.Context, names []string, ttl time.Duration, opts []ObtainOption, try bool) (*Lock, error) {
	// Check every name and option before any I/O, as Client.Any's would.
	check := request{names: names, spec: &plainSpec}
	if err := e.prepare(&check, ttl, opts, try); err != nil {
		return nil, err
	}
	if e.reg.isClosed() {
		return nil, ErrClosed
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	auto := check.o.auto
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
	parts := make([]*Lock, 0, len(sorted))
	for i, name := range sorted {
		o := keep
		if i == len(sorted)-1 {
			o = opts
		}
		r := request{names: []string{name}, spec: &plainSpec}
		err := e.prepare(&r, ttl, o, try)
		var l *Lock
		if err == nil {
			l, err = e.obtain(wctx, &r)
		}
		if err != nil {
			close(stop)
			watchers.Wait()
			releaseAll(parts)
			return nil, e.allFailed(ctx, wctx, name, err)
		}
		parts = append(parts, l)
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
	// its watcher: the lock would be born broken.
	for _, l := range parts {
		if lerr := l.Err(); lerr != nil {
			releaseAll(parts)
			if e.reg.isClosed() {
				return nil, fmt.Errorf("redlock: obtain all: %w", ErrClosed)
			}
			return nil, fmt.Errorf("redlock: obtain all: lock %q ended while the others were obtained: %w", l.lockName(), errors.Join(ErrNotObtained, lerr))
		}
	}
	if !auto && !try {
		for _, l := range parts[:len(parts)-1] {
			l.keepAliveOff()
		}
	}
	// One allocation for the Lock and its variant, as before the variant.
	both := &struct {
		Lock
		allOf
	}{Lock{e: e, sp: &plainSpec}, allOf{parts: parts, done: firstDone(parts)}}
	both.Lock.all = &both.allOf
	return &both.Lock, nil
}

// allOf is the variant of a lock of several names (Client.All): its parts,
// plain locks of one name each, in name order. Its Lock has no state of
// its own but its Client and kind label: every method asks the parts.
type allOf struct {
	parts []*Lock
	done  chan struct{} // closed when the first part ends
}

func (a *allOf) lockParts() []*Lock        { return append([]*Lock(nil), a.parts...) }
func (a *allOf) doneChan() <-chan struct{} { return a.done }

// isDegraded: whether any part is.
func (a *allOf) isDegraded() bool {
	for _, p := range a.parts {
		if p.Degraded() {
			return true
		}
	}
	return false
}

// heldUntil is the earliest of the parts' validities (zero once one is).
func (a *allOf) heldUntil() time.Time {
	var until time.Time
	for i, p := range a.parts {
		v := p.ValidUntil()
		if v.IsZero() {
			return time.Time{}
		}
		if i == 0 || v.Before(until) {
			until = v
		}
	}
	return until
}

// lastTTL is the shortest of the parts' TTLs.
func (a *allOf) lastTTL() time.Duration {
	ttl := time.Duration(0)
	for i, p := range a.parts {
		if t := p.TTL(); i == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// endErr is the error of the first part, in name order, that ended.
func (a *allOf) endErr() error {
	for _, p := range a.parts {
		if err := p.Err(); err != nil {
			return fmt.Errorf("lock %q: %w", p.lockName(), err)
		}
	}
	return nil
}

func (a *allOf) refresh(ctx context.Context, ttl time.Duration) error {
	return eachPart(a.parts, func(p *Lock) error { return p.Refresh(ctx, ttl) })
}

func (a *allOf) release(ctx context.Context) error {
	return eachPart(a.parts, func(p *Lock) error { return p.Release(ctx) })
}

// bind binds every part to Do: the loss of any part cancels its function.
func (a *allOf) bind(b *doBinding) {
	for _, p := range a.parts {
		p.bind(b)
	}
}

func (a *allOf) handoff() ([]byte, error) {
	return nil, errors.New("redlock: handoff: a lock of several names (Client.All) is handed off part by part (Lock.Parts)")
}

// firstDone returns a channel closed when the first of parts ends. Its
// goroutine ends with that part; Release and the Client's Close end every
// part.
func firstDone(parts []*Lock) chan struct{} {
	done := make(chan struct{})
	cases := make([]reflect.SelectCase, len(parts))
	for i, l := range parts {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.Done())}
	}
	go func() {
		reflect.Select(cases)
		close(done)
	}()
	return done
}

// allFailed is the error of Client.All's obtain when the obtain of name
// failed with err; wctx is the context of that obtain, derived from ctx and
// cancelled when a lock already held ended.
func (e *engine) allFailed(ctx, wctx context.Context, name string, err error) error {
	lost, _ := context.Cause(wctx).(*lostWhileWaiting)
	switch {
	case e.reg.isClosed():
		// Close released the locks already held, which ended the wait.
		return fmt.Errorf("redlock: obtain all: %q: %w", name, ErrClosed)
	case lost != nil && ctx.Err() == nil:
		return fmt.Errorf("redlock: obtain all: lock %q ended while waiting for %q: %w", lost.name, name, errors.Join(ErrNotObtained, lost.err))
	}
	return fmt.Errorf("redlock: obtain all: %q: %w", name, err)
}

// lostWhileWaiting is the cause of the end of Client.All's wait when a lock
// it already held ended.
type lostWhileWaiting struct {
	name string
	err  error
}

func (e *lostWhileWaiting) Error() string {
	return fmt.Sprintf("lock %q ended: %v", e.name, e.err)
}

func (e *lostWhileWaiting) Unwrap() error { return e.err }
