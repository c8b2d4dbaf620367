package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

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
