package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

// The Client's circuit breaker (WithBreaker): it counts a node unreachable
// after a number of requests in a row without a reply, and opens when fewer
// than a quorum are reachable. While it is open, obtains are refused (or
// wait, or fall back to the degraded mode's lease store), and a PING to
// every node each cooldown (the half-open probe) closes it once a quorum
// answers. Refreshes and releases are never refused by it.

func (e *engine) breakerFailures() int {
	if f := e.cfg.breaker.failures; f > 0 {
		return f
	}
	return defaultBreakerFailures
}

func (e *engine) breakerCooldown() time.Duration {
	if d := e.cfg.breaker.cooldown; d > 0 {
		return d
	}
	return defaultBreakerCooldown
}

// reachable counts the nodes the breaker counts as reachable, and returns
// the reason of each other one when detail is set.
func (e *engine) reachable(detail bool) (n int, up uint64, down []NodeResult) {
	limit := e.breakerFailures()
	now := e.cfg.now()
	for _, node := range e.nodes {
		count, last := node.Unreachable()
		if count < limit {
			n++
			up |= 1 << node.Index
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
			down = append(down, NodeResult{Node: node.Index, Addr: node.Addr, Err: err, Reason: reason(err)})
		}
	}
	return n, up, down
}

// gate is asked before each acquire round: it returns nil when the round
// may go to the nodes, and the error to return instead (a *QuorumError
// matching ErrBreakerOpen) when the breaker is open, or opens now because
// fewer than a quorum of nodes are reachable. timeout is the round's
// per-node timeout, used by the probes. The caller holds e.life for reading
// and the Client is not closed.
func (e *engine) gate(ctx context.Context, timeout time.Duration) *QuorumError {
	if e.cfg.breaker.off {
		return nil
	}
	if e.brk.current() == breakerClosed {
		if _, up, _ := e.reachable(false); e.majority.Met(up) {
			return nil
		}
		e.openBreaker(ctx, timeout)
	}
	return e.breakerError()
}

// breakerError describes the breaker as it is now: the error of an obtain
// it refused.
func (e *engine) breakerError() *QuorumError {
	n, _, down := e.reachable(true)
	e.brk.mu.Lock()
	st := e.brk.current()
	next := time.Duration(0)
	if st == breakerOpen {
		next = max(time.Until(e.brk.nextProbe), 0)
	}
	e.brk.mu.Unlock()
	detail := " (probing now)"
	if st == breakerOpen {
		detail = fmt.Sprintf(" (next probe in %v)", next.Round(time.Millisecond))
	}
	return &QuorumError{Op: "obtain", Need: e.majority.Need(), Agreed: n, Nodes: down,
		sentinels: []error{ErrBreakerOpen, ErrNotObtained}, detail: ruleDetail(e.majority) + detail}
}

// refusedByBreaker reports whether an attempt's error is the breaker's
// refusal, made without an acquire round.
func refusedByBreaker(err error) bool {
	return errors.Is(err, ErrBreakerOpen)
}

// openBreaker opens a closed breaker and starts its probe goroutine, which
// e.bg owns and Close stops. The caller holds e.life for reading.
func (e *engine) openBreaker(ctx context.Context, timeout time.Duration) {
	b := &e.brk
	b.mu.Lock()
	if b.current() != breakerClosed || b.stopped {
		b.mu.Unlock()
		return
	}
	if b.stop == nil {
		b.stop = make(chan struct{})
	}
	b.timeout = timeout
	b.nextProbe = time.Now().Add(e.breakerCooldown())
	b.setLocked(breakerOpen)
	stop := b.stop
	b.mu.Unlock()
	e.bg.Go(func() { e.probeLoop(stop) })
	berr := e.breakerError()
	e.breakerChanged(ctx, breakerClosed, breakerOpen, berr.Agreed, berr)
}

// probeLoop probes an open breaker every cooldown until a quorum of nodes
// answers (the breaker closes) or Close stops it.
func (e *engine) probeLoop(stop <-chan struct{}) {
	b := &e.brk
	t := time.NewTimer(e.breakerCooldown())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		b.setLocked(breakerHalfOpen)
		timeout := b.timeout
		b.mu.Unlock()
		e.breakerChanged(context.Background(), breakerOpen, breakerHalfOpen, -1, nil)
		won := e.probe(timeout)
		n, _, _ := e.reachable(false)
		b.mu.Lock()
		if won {
			b.setLocked(breakerClosed)
		} else {
			b.nextProbe = time.Now().Add(e.breakerCooldown())
			b.setLocked(breakerOpen)
		}
		b.mu.Unlock()
		if won {
			e.breakerChanged(context.Background(), breakerHalfOpen, breakerClosed, n, nil)
			return
		}
		e.breakerChanged(context.Background(), breakerHalfOpen, breakerOpen, n, nil)
		t.Reset(e.breakerCooldown())
	}
}

// minProbeTimeout is the least time a probe waits for a node: it runs in
// the background and delays no caller, and a node slower than the
// attempts' per-node timeout is still reachable.
const minProbeTimeout = 500 * time.Millisecond

// probe sends a PING to every node, even to those skipped by their own
// breaker, and reports whether a quorum answered. The answers reset the
// nodes' counts of requests without reply.
func (e *engine) probe(timeout time.Duration) bool {
	round := quorum.Round[bool]{
		Nodes:   e.nodes,
		Quorum:  e.majority,
		Timeout: max(timeout, minProbeTimeout),
		Force:   true,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			_, err := n.Conn.Do(ctx, "PING")
			return true, err
		},
		Agree: func(ok bool) bool { return ok },
	}
	return round.Run(context.Background(), &e.bg).Won
}

// stopBreaker stops the probe goroutine; Close calls it before waiting for
// e.bg.
func (e *engine) stopBreaker() {
	b := &e.brk
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.stopped = true
		if b.stop != nil {
			close(b.stop)
		}
		if b.changed != nil {
			// Wake the waiters of obtains: they return ErrClosed.
			close(b.changed)
			b.changed = nil
		}
	}
}

// waitBreaker waits until the breaker is closed, or ctx ends: then it
// returns the breaker's error (the caller joins ctx's).
func (e *engine) waitBreaker(ctx context.Context) error {
	if e.cfg.breaker.off {
		return nil
	}
	b := &e.brk
	for {
		b.mu.Lock()
		st, ch := b.current(), b.changedLocked()
		b.mu.Unlock()
		if st == breakerClosed {
			return nil
		}
		if e.isClosed() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return e.breakerError()
		}
	}
}

// breakerChanged reports a change of state to the hook and the logger.
// reachable < 0 means not known (counted here).
func (e *engine) breakerChanged(ctx context.Context, from, to string, reachable int, berr *QuorumError) {
	if !e.observed() {
		return
	}
	if reachable < 0 {
		reachable, _, _ = e.reachable(false)
	}
	if e.cfg.hook != nil {
		ev := BreakerEvent{From: BreakerState(from), To: BreakerState(to), Reachable: reachable, Need: e.majority.Need()}
		if berr != nil {
			ev.Err = berr
		}
		e.emit(ctx, ev)
	}
	lg := e.cfg.logger
	if lg == nil {
		return
	}
	switch {
	case from == breakerClosed && to == breakerOpen:
		mode := "obtains fail at once (TryObtain) or wait (Obtain)"
		if e.cfg.fallback != nil {
			mode = "obtains of plain locks use the degraded mode's lease store"
		}
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: circuit breaker open: fewer than a quorum of nodes reachable; "+mode,
			slog.Int("reachable", reachable), slog.Int("need", e.majority.Need()), slog.String("reason", berr.Error()))
	case to == breakerClosed:
		lg.LogAttrs(ctx, slog.LevelInfo, "redlock: circuit breaker closed: a quorum of nodes answered a probe",
			slog.Int("reachable", reachable), slog.Int("need", e.majority.Need()))
	}
}
