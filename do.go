package redlock

import (
	"context"
	"errors"
	"fmt"
)

// doBinding binds a lock to Do's function: the lock's loss cancels the
// function's context, and ctx is the context of the lock's events that no
// call makes (automatic refreshes, the loss). A lock of several names
// shares one binding among its parts.
//
// The locking rule: a binding does not change once made; a lock holds it
// in an atomic pointer (Lock.do), stored by attach under the Lock's mu
// with the check of the lock's end, so that a loss finds it or attach
// finds the loss.
type doBinding struct {
	cancel context.CancelCauseFunc
	ctx    context.Context
}

// lost cancels Do's function's context: the lock was lost. A nil binding
// (no Do) does nothing.
func (b *doBinding) lost() {
	if b != nil {
		b.cancel(ErrLost)
	}
}

// context is the context of the lock's events of no call.
func (b *doBinding) context() context.Context {
	if b == nil {
		return context.Background()
	}
	return b.ctx
}

// attach makes the lock Do's: its loss cancels Do's function's context (at
// once if it is lost already). Every part of a lock of several names is
// attached: the loss of any cancels the function.
func (b *doBinding) attach(l *Lock) {
	if l.all != nil {
		for _, p := range l.all.parts {
			b.attach(p)
		}
		return
	}
	l.mu.Lock()
	l.do.Store(b)
	lost := l.err != nil && errors.Is(l.err, ErrLost)
	l.mu.Unlock()
	if lost {
		b.lost()
	}
}

// runHeld runs Do's fn under lock, which is held and kept alive, and
// releases it: fn's context is cancelled with cause ErrLost the moment the
// lock can no longer be guaranteed, and carries IsDegraded for a lock
// obtained in degraded mode. It returns fn's error, joined with an error
// wrapping ErrLost when the lock was lost.
func runHeld(ctx context.Context, lock *Lock, fn func(context.Context) error) error {
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &doBinding{cancel: cancel, ctx: context.WithoutCancel(ctx)}
	b.attach(lock)
	if lock.Degraded() {
		fnCtx = context.WithValue(fnCtx, degradedKey{}, true)
	}
	ferr := fn(fnCtx)
	lostErr := lock.Err()
	rerr := lock.Release(context.WithoutCancel(ctx))
	switch {
	case errors.Is(lostErr, ErrLost):
		return errors.Join(ferr, lostErr)
	case errors.Is(rerr, ErrNotHeld):
		// The nodes say the lock was not ours at the end, though it never
		// ran out here: an assumption of the safety model was broken.
		return errors.Join(ferr, fmt.Errorf("%w: the nodes no longer held it at release: %w", ErrLost, rerr))
	}
	return ferr
}
