package redlock

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// allOf is a lock of several names (Client.All): its parts, plain locks
// of one name each, in name order. Its Lock has no state of its own but
// its Client and kind label: each of its public methods asks the allOf,
// which asks the parts.
type allOf struct {
	parts []*Lock
	done  chan struct{} // closed when the first part ends
}

// degraded is whether any part is degraded.
func (a *allOf) degraded() bool {
	for _, p := range a.parts {
		if p.Degraded() {
			return true
		}
	}
	return false
}

// validUntil is the earliest of the parts' validities (zero once one is).
func (a *allOf) validUntil() time.Time {
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

// ttl is the shortest of the parts' TTLs.
func (a *allOf) ttl() time.Duration {
	ttl := time.Duration(0)
	for i, p := range a.parts {
		if t := p.TTL(); i == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// err is the error of the first part, in name order, that ended.
func (a *allOf) err() error {
	for _, p := range a.parts {
		if err := p.Err(); err != nil {
			return fmt.Errorf("lock %q: %w", p.Name(), err)
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
