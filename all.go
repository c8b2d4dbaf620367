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
	check := request{names: names, spec: plainSpec}
	if err := e.prepare(&check, ttl, opts, try); err != nil {
		return nil, err
	}
	if e.isClosed() {
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
		r := request{names: []string{name}, spec: plainSpec}
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
			if e.isClosed() {
				return nil, fmt.Errorf("redlock: obtain all: %w", ErrClosed)
			}
			return nil, fmt.Errorf("redlock: obtain all: lock %q ended while the others were obtained: %w", l.name, errors.Join(ErrNotObtained, lerr))
		}
	}
	if !auto && !try {
		for _, l := range parts[:len(parts)-1] {
			l.keepAliveOff()
		}
	}
	return &Lock{e: e, label: "plain", parts: parts, partDone: firstDone(parts)}, nil
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
	case e.isClosed():
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
