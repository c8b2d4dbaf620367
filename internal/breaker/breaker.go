// Package breaker is the state machine of a Client's circuit breaker
// (WithBreaker): closed, open, half-open while a probe runs, and the loop
// that probes an open breaker every cooldown. The Client counts the
// reachable nodes, sends the probes and reports the changes; this package
// keeps the state, wakes the obtains that wait for a change, and counts
// the closings that a degraded lock records.
package breaker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// State is a state of the breaker.
type State uint32

// The states of the breaker.
const (
	Closed State = iota
	Open
	HalfOpen
)

// String is the state's label (Client.BreakerState, BreakerEvent).
func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "closed"
}

// Breaker is one Client's breaker. The zero value is closed.
type Breaker struct {
	state atomic.Uint32
	// closings counts the breaker's changes to closed: a degraded lock
	// records it when taken, and is not extended once it has moved, even
	// if the breaker has opened again since.
	closings atomic.Uint64

	mu        sync.Mutex
	changed   chan struct{} // closed at each change of state, then replaced
	stop      chan struct{} // closed by Stop: the probe loop returns
	stopped   bool
	nextProbe time.Time     // when the next probe is due (open only)
	timeout   time.Duration // the per-node timeout of the probes
}

// State is the breaker's state.
func (b *Breaker) State() State { return State(b.state.Load()) }

// Closings is the number of the breaker's changes to closed.
func (b *Breaker) Closings() uint64 { return b.closings.Load() }

// setLocked moves the breaker to s and wakes the waiters. b.mu must be held.
func (b *Breaker) setLocked(s State) {
	if s == Closed && b.State() != Closed {
		b.closings.Add(1)
	}
	b.state.Store(uint32(s))
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// Open opens a closed breaker, at now, with probes every cooldown whose
// per-node timeout is timeout. It returns false, and changes nothing, when
// the breaker is not closed or is stopped; else the channel that Stop
// closes, for the probe loop.
func (b *Breaker) Open(now time.Time, cooldown, timeout time.Duration) (stop <-chan struct{}, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.State() != Closed || b.stopped {
		return nil, false
	}
	if b.stop == nil {
		b.stop = make(chan struct{})
	}
	b.timeout = timeout
	b.nextProbe = now.Add(cooldown)
	b.setLocked(Open)
	return b.stop, true
}

// NextProbe is the breaker's state and, when it is open, when its next
// probe is due.
func (b *Breaker) NextProbe() (State, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.State()
	if st != Open {
		return st, time.Time{}
	}
	return st, b.nextProbe
}

// Changed is the breaker's state and a channel closed at its next change
// (or by Stop).
func (b *Breaker) Changed() (State, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.State(), b.changed
}

// Prober is what the probe loop asks of the Client.
type Prober struct {
	// Cooldown is the time between two probes.
	Cooldown time.Duration
	// Now is the Client's clock.
	Now func() time.Time
	// Probe runs one probe with that per-node timeout, and reports whether
	// a quorum answered.
	Probe func(timeout time.Duration) bool
	// Changed reports a change of state; the first is the probe's start
	// (Open to HalfOpen), the others its end.
	Changed func(ctx context.Context, from, to State)
}

// ProbeLoop probes an open breaker every cooldown until a probe closes it
// or stop (from Open) is closed.
func (b *Breaker) ProbeLoop(stop <-chan struct{}, p Prober) {
	t := time.NewTimer(p.Cooldown)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		b.setLocked(HalfOpen)
		timeout := b.timeout
		b.mu.Unlock()
		p.Changed(context.Background(), Open, HalfOpen)
		won := p.Probe(timeout)
		b.mu.Lock()
		if won {
			b.setLocked(Closed)
		} else {
			b.nextProbe = p.Now().Add(p.Cooldown)
			b.setLocked(Open)
		}
		b.mu.Unlock()
		if won {
			p.Changed(context.Background(), HalfOpen, Closed)
			return
		}
		p.Changed(context.Background(), HalfOpen, Open)
		t.Reset(p.Cooldown)
	}
}

// Stop stops the probe loop and wakes the waiters of a change; the breaker
// does not open again.
func (b *Breaker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	if b.stop != nil {
		close(b.stop)
	}
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}
