package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

// Defaults of the Client's circuit breaker (WithBreaker).
const (
	// DefaultBreakerFailures is how many requests in a row must get no
	// reply from a node (a timeout, a refused or broken connection) for
	// the breaker to count it unreachable.
	DefaultBreakerFailures = 3
	// DefaultBreakerCooldown is the time between two half-open probes of
	// an open breaker.
	DefaultBreakerCooldown = time.Second
)

// ErrBreakerOpen means an obtain was refused at once, without asking the
// nodes, because the Client's circuit breaker is open: fewer than a quorum
// of nodes are reachable. It is wrapped in a *BreakerError, which also
// matches ErrNotObtained and names each unreachable node.
var ErrBreakerOpen = errors.New("redlock: circuit breaker open")

// BreakerState is the state of a Client's circuit breaker.
type BreakerState int32

const (
	// BreakerClosed: a quorum of nodes is reachable; obtains go to the
	// nodes.
	BreakerClosed BreakerState = iota
	// BreakerOpen: fewer than a quorum of nodes are reachable; obtains
	// fail at once with ErrBreakerOpen (TryObtain), wait for the breaker
	// to close (Obtain), or use the degraded mode's lease store
	// (WithDegradedMode).
	BreakerOpen
	// BreakerHalfOpen: a probe (a PING to every node) is under way; obtains
	// are refused as while open.
	BreakerHalfOpen
)

// String returns "closed", "open", "half_open", or "unknown".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// BreakerError is the error of an obtain refused by the open circuit
// breaker. errors.Is matches ErrBreakerOpen, ErrNotObtained and each
// unreachable node's last error.
type BreakerError struct {
	// State is the breaker's state: BreakerOpen or BreakerHalfOpen.
	State BreakerState
	// Reachable is how many nodes are reachable; Need is the quorum.
	Reachable, Need int
	// NextProbe is how long until the next half-open probe (0 when one is
	// under way).
	NextProbe time.Duration
	// Nodes names every unreachable node, with the number of requests in
	// a row that got no reply and the last one's error.
	Nodes []*NodeError
}

// Error says that the breaker is open, how many nodes are reachable of how
// many needed, and why each other node is not.
func (e *BreakerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: obtain: circuit breaker %s: %d of %d needed nodes reachable, failing at once",
		e.State, e.Reachable, e.Need)
	if e.NextProbe > 0 {
		fmt.Fprintf(&b, " (next probe in %v)", e.NextProbe.Round(time.Millisecond))
	}
	for _, n := range e.Nodes {
		b.WriteString("; ")
		b.WriteString(n.Error())
	}
	return b.String()
}

// Unwrap returns ErrBreakerOpen, ErrNotObtained and every node's error.
func (e *BreakerError) Unwrap() []error {
	errs := make([]error, 0, len(e.Nodes)+2)
	errs = append(errs, ErrBreakerOpen, ErrNotObtained)
	for _, n := range e.Nodes {
		errs = append(errs, n)
	}
	return errs
}

// BreakerEvent describes a change of the circuit breaker's state.
type BreakerEvent struct {
	From, To BreakerState
	// Reachable is how many nodes were reachable at the change; Need is
	// the quorum.
	Reachable, Need int
	// Err is the *BreakerError of the opening (nil for other changes).
	Err error
}

// DegradedEvent describes a lock obtained in degraded mode, from the lease
// store of WithDegradedMode while the breaker was open, not from Redis. Its
// end is reported like any lock's (ReleaseEvent, LostEvent), with the same
// Token, which is negative (IsDegradedToken).
type DegradedEvent struct {
	// Key is the lock's name, as given to Obtain.
	Key string
	// ObtainID is that of the obtain the lock came from (ObtainEvent).
	ObtainID uint64
	// Token is the lock's token: negative, see Lock.Token.
	Token int64
	// ValidUntil is the end of the lease's validity on this process's
	// monotonic clock.
	ValidUntil time.Time
}

// BreakerHook is implemented by a Hook that also observes the circuit
// breaker and the degraded mode. The Client calls these methods when its
// Hook implements them; BaseHook does (with methods that do nothing), and
// so does JoinHooks' Hook, which passes each event to the hooks that
// implement BreakerHook.
type BreakerHook interface {
	// Breaker is called after each change of the breaker's state.
	Breaker(context.Context, BreakerEvent)
	// Degraded is called when a lock is obtained in degraded mode.
	Degraded(context.Context, DegradedEvent)
}

// Breaker does nothing.
func (BaseHook) Breaker(context.Context, BreakerEvent) {}

// Degraded does nothing.
func (BaseHook) Degraded(context.Context, DegradedEvent) {}

func (j joined) Breaker(ctx context.Context, e BreakerEvent) {
	for _, h := range j {
		if bh, ok := h.(BreakerHook); ok {
			bh.Breaker(ctx, e)
		}
	}
}

func (j joined) Degraded(ctx context.Context, e DegradedEvent) {
	for _, h := range j {
		if bh, ok := h.(BreakerHook); ok {
			bh.Degraded(ctx, e)
		}
	}
}

// breakerConfig holds WithBreaker's thresholds; zero values mean the
// defaults.
type breakerConfig struct {
	off      bool
	failures int
	cooldown time.Duration
}

func (b *breakerConfig) validate() error {
	if b.failures < 0 {
		return invalid("breaker failures %d is negative", b.failures)
	}
	if b.cooldown < 0 {
		return invalid("breaker cooldown %v is negative", b.cooldown)
	}
	return nil
}

// WithBreaker sets the thresholds of the Client's circuit breaker. A node
// counts as unreachable once failures requests in a row (of any kind:
// acquire, refresh, release, probe) got no reply from it: a timeout, or a
// refused or broken connection; an error reply from Redis (WRONGTYPE,
// NOPERM, …) or a "recovering" answer is a reply. When fewer than a quorum
// of nodes are reachable, the breaker opens: TryObtain fails at once with
// a *BreakerError (ErrBreakerOpen) that names the unreachable nodes,
// instead of spending a per-node timeout; Obtain and Do wait for it to
// close (their context bounds the wait; with WithMaxAttempts, each refusal
// uses up an attempt instead, so that Obtain still ends); refreshes and
// releases still go to the nodes. While open, the breaker probes every
// cooldown, with a PING to every node (waiting up to 500 ms, or the
// per-node timeout if longer); it closes as soon as a quorum answers one.
//
// Defaults DefaultBreakerFailures (3) and DefaultBreakerCooldown (1 s); 0
// keeps a default. The breaker is on by default: WithoutBreaker turns it
// off.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return clientOption(func(c *config) {
		c.breaker.off = false
		c.breaker.failures, c.breaker.cooldown = failures, cooldown
	})
}

// WithoutBreaker turns the Client's circuit breaker off: every obtain asks
// the nodes, whatever their recent failures (each node's own skip after
// three timeouts in a row stays). WithDegradedMode needs the breaker.
func WithoutBreaker() Option {
	return clientOption(func(c *config) { c.breaker.off = true })
}

// breaker is a Client's circuit breaker: its state, the channel that tells
// waiters of a change, and the probe goroutine's stop signal.
type breaker struct {
	state atomic.Int32 // a BreakerState
	// closings counts the breaker's changes to closed: a degraded lock
	// records it when taken, and is not extended once it has moved, even
	// if the breaker has opened again since (degraded.go).
	closings atomic.Uint64

	mu        sync.Mutex
	changed   chan struct{} // closed at each change of state, then replaced
	stop      chan struct{} // closed by Close: the probe goroutine returns
	stopped   bool
	nextProbe time.Time     // when the next probe is due (open only)
	timeout   time.Duration // the per-node timeout of the probes
}

// changedLocked returns the channel closed at the next change. b.mu must be
// held.
func (b *breaker) changedLocked() chan struct{} {
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// setLocked moves the breaker to s and wakes the waiters. b.mu must be held.
func (b *breaker) setLocked(s BreakerState) {
	if s == BreakerClosed && BreakerState(b.state.Load()) != BreakerClosed {
		b.closings.Add(1)
	}
	b.state.Store(int32(s))
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// BreakerState returns the state of the Client's circuit breaker
// (BreakerClosed when it is off: see WithoutBreaker).
func (c *Client) BreakerState() BreakerState {
	return BreakerState(c.brk.state.Load())
}

func (c *Client) breakerFailures() int {
	if f := c.cfg.breaker.failures; f > 0 {
		return f
	}
	return DefaultBreakerFailures
}

func (c *Client) breakerCooldown() time.Duration {
	if d := c.cfg.breaker.cooldown; d > 0 {
		return d
	}
	return DefaultBreakerCooldown
}

// reachable counts the nodes the breaker counts as reachable, and returns
// the reason of each other one.
func (c *Client) reachable(detail bool) (n int, down []*NodeError) {
	limit := c.breakerFailures()
	now := c.cfg.now()
	for _, node := range c.nodes {
		count, last := node.Unreachable()
		if count < limit {
			n++
			continue
		}
		if detail {
			if last == nil {
				last = errors.New("no reply")
			}
			err := fmt.Errorf("unreachable: %d requests in a row got no reply, the last: %w", count, last)
			if node.Skipped(now) {
				err = fmt.Errorf("%w; %w", ErrNodeSkipped, err)
			}
			down = append(down, &NodeError{Node: node.Index, Addr: node.Addr, Err: err})
		}
	}
	return n, down
}

// gate is asked before each acquire round: it returns nil when the round
// may go to the nodes, and the *BreakerError to return instead when the
// breaker is open, or opens now because fewer than a quorum of nodes are
// reachable. timeout is the round's per-node timeout, used by the probes.
// The caller holds c.life for reading and the Client is not closed.
func (c *Client) gate(ctx context.Context, timeout time.Duration) *BreakerError {
	if c.cfg.breaker.off {
		return nil
	}
	if c.BreakerState() == BreakerClosed {
		if n, _ := c.reachable(false); n >= c.quorum {
			return nil
		}
		c.openBreaker(ctx, timeout)
	}
	return c.breakerError()
}

// breakerError describes the breaker as it is now.
func (c *Client) breakerError() *BreakerError {
	n, down := c.reachable(true)
	c.brk.mu.Lock()
	st := c.BreakerState()
	next := time.Duration(0)
	if st == BreakerOpen {
		next = max(time.Until(c.brk.nextProbe), 0)
	}
	c.brk.mu.Unlock()
	return &BreakerError{State: st, Reachable: n, Need: c.quorum, NextProbe: next, Nodes: down}
}

// openBreaker opens a closed breaker and starts its probe goroutine, which
// c.bg owns and Close stops. The caller holds c.life for reading.
func (c *Client) openBreaker(ctx context.Context, timeout time.Duration) {
	b := &c.brk
	b.mu.Lock()
	if c.BreakerState() != BreakerClosed || b.stopped {
		b.mu.Unlock()
		return
	}
	if b.stop == nil {
		b.stop = make(chan struct{})
	}
	b.timeout = timeout
	b.nextProbe = time.Now().Add(c.breakerCooldown())
	b.setLocked(BreakerOpen)
	stop := b.stop
	b.mu.Unlock()
	c.bg.Go(func() { c.probeLoop(stop) })
	berr := c.breakerError()
	c.breakerChanged(ctx, BreakerClosed, BreakerOpen, berr.Reachable, berr)
}

// probeLoop probes an open breaker every cooldown until a quorum of nodes
// answers (the breaker closes) or Close stops it.
func (c *Client) probeLoop(stop <-chan struct{}) {
	b := &c.brk
	t := time.NewTimer(c.breakerCooldown())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		b.setLocked(BreakerHalfOpen)
		timeout := b.timeout
		b.mu.Unlock()
		c.breakerChanged(context.Background(), BreakerOpen, BreakerHalfOpen, -1, nil)
		won := c.probe(timeout)
		n, _ := c.reachable(false)
		b.mu.Lock()
		if won {
			b.setLocked(BreakerClosed)
		} else {
			b.nextProbe = time.Now().Add(c.breakerCooldown())
			b.setLocked(BreakerOpen)
		}
		b.mu.Unlock()
		if won {
			c.breakerChanged(context.Background(), BreakerHalfOpen, BreakerClosed, n, nil)
			return
		}
		c.breakerChanged(context.Background(), BreakerHalfOpen, BreakerOpen, n, nil)
		t.Reset(c.breakerCooldown())
	}
}

// minProbeTimeout is the least time a probe waits for a node: it runs in
// the background and delays no caller, and a node slower than the
// attempts' per-node timeout is still reachable.
const minProbeTimeout = 500 * time.Millisecond

// probe sends a PING to every node, even to those skipped by their own
// breaker, and reports whether a quorum answered. The answers reset the
// nodes' counts of requests without reply.
func (c *Client) probe(timeout time.Duration) bool {
	round := quorum.Round[bool]{
		Nodes:   c.nodes,
		Quorum:  c.quorum,
		Timeout: max(timeout, minProbeTimeout),
		Force:   true,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			return true, n.Client.Ping(ctx).Err()
		},
		Agree: func(ok bool) bool { return ok },
	}
	return round.Run(context.Background(), &c.bg).Won
}

// stopBreaker stops the probe goroutine; Close calls it before waiting for
// c.bg.
func (c *Client) stopBreaker() {
	b := &c.brk
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		if b.stop != nil {
			close(b.stop)
		}
		if b.changed != nil {
			// Wake the waiters of Obtain: they return ErrClosed.
			close(b.changed)
			b.changed = nil
		}
	}
}

// waitBreaker waits until the breaker is closed, or ctx ends: then it
// returns the breaker's error (the caller joins ctx's).
func (c *Client) waitBreaker(ctx context.Context) error {
	if c.cfg.breaker.off {
		return nil
	}
	b := &c.brk
	for {
		b.mu.Lock()
		st, ch := c.BreakerState(), b.changedLocked()
		b.mu.Unlock()
		if st == BreakerClosed {
			return nil
		}
		if c.isClosed() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return c.breakerError()
		}
	}
}

// breakerChanged reports a change of state to the hook and the logger.
// reachable < 0 means not known (counted here).
func (c *Client) breakerChanged(ctx context.Context, from, to BreakerState, reachable int, berr *BreakerError) {
	if !c.observed() {
		return
	}
	if reachable < 0 {
		reachable, _ = c.reachable(false)
	}
	if bh, ok := c.cfg.hook.(BreakerHook); ok {
		ev := BreakerEvent{From: from, To: to, Reachable: reachable, Need: c.quorum}
		if berr != nil {
			ev.Err = berr
		}
		bh.Breaker(ctx, ev)
	}
	lg := c.cfg.logger
	if lg == nil {
		return
	}
	switch {
	case from == BreakerClosed && to == BreakerOpen:
		mode := "obtains fail at once (TryObtain) or wait (Obtain)"
		if c.cfg.fallback != nil {
			mode = "obtains use the degraded mode's lease store"
		}
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: circuit breaker open: fewer than a quorum of nodes reachable; "+mode,
			slog.Int("reachable", reachable), slog.Int("need", c.quorum), slog.String("reason", berr.Error()))
	case to == BreakerClosed:
		lg.LogAttrs(ctx, slog.LevelInfo, "redlock: circuit breaker closed: a quorum of nodes answered a probe",
			slog.Int("reachable", reachable), slog.Int("need", c.quorum))
	}
}

// refusedByBreaker reports whether an attempt's error is the breaker's
// refusal, made without an acquire round.
func refusedByBreaker(err error) bool {
	var be *BreakerError
	return errors.As(err, &be)
}
