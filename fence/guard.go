package fence

import (
	"context"
	"fmt"
	"sync"
)

// GuardStore keeps the highest token admitted per resource, for a Guard:
// in memory (MemoryStore), or in a store of your own that survives the
// service's restarts (a row, a file, a Redis key).
type GuardStore interface {
	// Admit records s as resource's fence when s's token is at least the
	// fence's (or none is recorded), atomically, and returns the fence
	// after the call and whether s was admitted.
	Admit(ctx context.Context, resource string, s Sequencer) (fence Sequencer, ok bool, err error)
}

// MemoryStore is a GuardStore in memory: it forgets everything when the
// process exits, so after a restart it admits any token once per resource
// (a stale holder's first request included). It keeps one int64 per
// resource until Delete. It is safe for concurrent use; the zero value is
// ready to use.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]Sequencer
}

// Admit implements GuardStore.
func (s *MemoryStore) Admit(_ context.Context, resource string, seq Sequencer) (Sequencer, bool, error) {
	if s == nil {
		return Sequencer{}, false, invalid("nil *MemoryStore")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]Sequencer)
	}
	if h, ok := s.m[resource]; ok && (seq.Token < h.Token || h.Lock != "" && seq.Lock != h.Lock) {
		return h, false, nil
	}
	s.m[resource] = seq
	return seq, true, nil
}

// Reset sets resource's fence to to: its highest token and the lock it
// follows, or, for the zero Sequencer, none (as Delete). It checks
// nothing: it is the way out of a poisoned fence (see Redis.Reset, and
// docs/fencing.md, "Poisoned fences"); a service exposes it to its
// operators as it sees fit. A Guard whose store is a *Redis is reset with
// Redis.Reset, or redlock fence reset.
func (s *MemoryStore) Reset(resource string, to Sequencer) {
	if s == nil {
		return
	}
	if to == (Sequencer{}) {
		s.Delete(resource)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]Sequencer)
	}
	s.m[resource] = to
}

// Delete forgets resource: its next token is admitted whatever it is. Call
// it when the resource itself is deleted.
func (s *MemoryStore) Delete(resource string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.m, resource)
	s.mu.Unlock()
}

// Guard fences a service that receives the token with each request (an
// HTTP API, a file store): it admits a request for a resource only with a
// token at least the highest it has admitted for that resource, and runs
// the request's work while no other request of the resource runs in this
// process. That second part makes the check and the work one step: without
// it, a stale request admitted just before a newer one could do its work
// after the newer one's. So the work holds the resource: it must be the
// write alone, with nothing that waits on the holder (its request's body:
// Middleware reads it first). Across several processes serving one resource,
// the guard cannot make them one step: check in the data store itself
// there (Redis, Table). Guard is safe for concurrent use.
type Guard struct {
	store GuardStore
	opts  options

	mu   sync.Mutex
	busy map[string]*slot
}

// slot serializes the requests of one resource; it is dropped when none
// uses it.
type slot struct {
	sem  chan struct{}
	refs int
}

// NewGuard returns a guard keeping its tokens in store. A nil store (a
// typed nil too) makes every Do fail with an error matching ErrInvalid,
// and Middleware answer 500.
func NewGuard(store GuardStore, opts ...Option) *Guard {
	if isNil(store) {
		store = nil
	}
	return &Guard{store: store, opts: newOptions(opts), busy: make(map[string]*slot)}
}

// ready refuses a guard that cannot admit a token: nil, without a store,
// or given a nil Checker.
func (g *Guard) ready() error {
	switch {
	case g == nil:
		return invalid("nil *Guard: make it with NewGuard")
	case g.store == nil:
		return invalid("no guard store: NewGuard was given a nil store")
	case g.opts.checkerSet && isNil(g.opts.checker):
		return invalid("Checked was given a nil Checker")
	}
	return nil
}

// check asks the guard's Checker, in the Checked mode, whether seq is
// current, and returns why not: a *StaleError (ErrStale) when superseded,
// else an error saying the nodes could not tell.
func (g *Guard) check(ctx context.Context, resource string, seq Sequencer) error {
	if !g.opts.checkerSet {
		return nil
	}
	if seq.Lock == "" {
		return invalid("%s: a bare token (%d) names no lock, and the guard admits only a sequencer its lock's nodes say is current (Checked)", resource, seq.Token)
	}
	st, err := g.opts.checker.Check(ctx, seq)
	switch {
	case st == Current:
		return nil
	case st == Superseded:
		return &StaleError{Resource: resource, Lock: seq.Lock, Token: seq.Token, Superseded: true}
	case err != nil:
		return fmt.Errorf("fence: %s: the nodes of lock %q could not say whether token %d is current: %w", resource, seq.Lock, seq.Token, err)
	}
	return fmt.Errorf("fence: %s: the nodes of lock %q could not say whether token %d is current (%v)", resource, seq.Lock, seq.Token, st)
}

// Do waits until no other call of Do for resource runs (or ctx ends),
// admits seq for resource, and runs fn. In the Checked mode it first asks
// the Checker whether seq is current, and admits it only then. It returns
// a *StaleError (ErrStale) without running fn when seq's token is below
// the highest admitted (or negative without AllowNegative), or when the
// Checker says seq is superseded (StaleError.Superseded); an error
// matching ErrOtherLock when the resource follows another lock; an error
// wrapping ErrInvalid for an empty resource, token 0, or a bare token in
// the Checked mode; an error wrapping the Checker's when its nodes could
// not say; the store's error, ctx's error, or fn's error. Do does not
// verify signatures (Signed is the Middleware's): a service that takes
// sequencers by another channel verifies them itself, comparing with
// hmac.Equal the signature it got and Sign's.
func (g *Guard) Do(ctx context.Context, resource string, seq Sequencer, fn func(context.Context) error) error {
	if err := g.ready(); err != nil {
		return err
	}
	switch {
	case ctx == nil:
		return invalid("nil context")
	case fn == nil:
		return invalid("nil function")
	case resource == "":
		return invalid("empty resource")
	}
	if err := g.opts.admit(resource, seq); err != nil {
		return err
	}
	s := g.take(resource)
	defer g.drop(resource, s)
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	if err := g.check(ctx, resource, seq); err != nil {
		return err
	}
	highest, ok, err := g.store.Admit(ctx, resource, seq)
	if err != nil {
		return fmt.Errorf("fence: %s: guard store: %w", resource, err)
	}
	switch {
	case ok:
	case highest.Lock != "" && highest.Lock != seq.Lock:
		return &otherLockError{resource: resource, s: seq, follows: highest.Lock}
	default:
		return &StaleError{Resource: resource, Lock: seq.Lock, Token: seq.Token, Fence: highest.Token}
	}
	return fn(ctx)
}

func (g *Guard) take(resource string) *slot {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy == nil {
		g.busy = make(map[string]*slot)
	}
	s := g.busy[resource]
	if s == nil {
		s = &slot{sem: make(chan struct{}, 1)}
		g.busy[resource] = s
	}
	s.refs++
	return s
}

func (g *Guard) drop(resource string, s *slot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(g.busy, resource)
	}
}
