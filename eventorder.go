package redlock

import (
	"context"
)

// eventOrder is the part of a lock that keeps its events in order (see
// Hook): its ObtainEvent first, its LostEvent (if any) before its ReleaseEvent. A loss
// found by the keep-alive, or a release by Close, can come before the
// obtain that returns the lock has reported it.
//
// The locking rule: none. Its fields are set before the lock is shared
// (open, and silent by an obtain that gives the lock back unseen), and
// only read after; announced is a channel, closed once.
type eventOrder struct {
	id uint64 // ObtainEvent.LockID; 0 when nothing observes the Client
	// announced is closed once the lock's ObtainEvent is reported; it is
	// made when the Client has a hook. The lock's other events wait for it
	// (emit).
	announced chan struct{}
	// silent is set on a lock that its obtain gives back before returning
	// it: none of its events is reported.
	silent bool
}

// open readies the event order of a lock just obtained, before it is
// shared: its ID when the Client is observed, and the wait for its
// ObtainEvent when it has a hook.
func (g *eventOrder) open(e *engine) {
	if e.cfg.observed() {
		g.id = lockIDs.Add(1)
	}
	if e.cfg.hook != nil {
		g.announced = make(chan struct{})
	}
}

// announce is called once the lock's ObtainEvent is reported: its other
// events may go.
func (g *eventOrder) announce() {
	if g.announced != nil {
		close(g.announced)
	}
}

// emit reports one of the lock's events through cfg after its ObtainEvent
// (see Hook),
// waiting for it if need be: the obtain that returns the lock reports it
// as soon as its round is over.
func (g *eventOrder) emit(cfg *config, ctx context.Context, ev Event) {
	if g.silent {
		return
	}
	if g.announced != nil {
		<-g.announced
	}
	cfg.emit(ctx, ev)
}
