package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/breaker"
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

// breakerLabel is the label of a state of the breaker
// (Client.BreakerState, BreakerEvent).
func breakerLabel(s breaker.State) BreakerState { return BreakerState(s.String()) }

// breakerRefusal is asked before each acquire round: it returns nil when the round
// may go to the nodes, and the error to return instead (a *QuorumError
// matching ErrBreakerOpen) when the breaker is open, or opens now because
// fewer than a quorum of nodes are reachable. timeout is the round's
// per-node timeout, used by the probes. The caller holds e.life for reading
// and the Client is not closed.
func (e *engine) breakerRefusal(ctx context.Context, timeout time.Duration) *QuorumError {
	if e.cfg.breaker.off {
		return nil
	}
	if e.brk.State() == breaker.Closed {
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
	st, at := e.brk.NextProbe()
	next := time.Duration(0)
	if st == breaker.Open {
		next = max(at.Sub(e.cfg.now()), 0)
	}
	detail := " (probing now)"
	if st == breaker.Open {
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

// openBreaker opens a closed breaker and starts its probe loop, which
// e.bg owns and Close stops. The caller holds e.life for reading.
func (e *engine) openBreaker(ctx context.Context, timeout time.Duration) {
	stop, ok := e.brk.Open(e.cfg.now(), e.breakerCooldown(), timeout)
	if !ok {
		return
	}
	e.bg.Go(func() { e.probeLoop(stop) })
	berr := e.breakerError()
	e.breakerChanged(ctx, breaker.Closed, breaker.Open, berr.Agreed, berr)
}

// probeLoop probes an open breaker every cooldown until a quorum of nodes
// answers (the breaker closes) or Close stops it.
func (e *engine) probeLoop(stop <-chan struct{}) {
	n := -1 // the reachable nodes after the last probe
	e.brk.ProbeLoop(stop, breaker.Prober{
		Cooldown: e.breakerCooldown(),
		Now:      e.cfg.now,
		Probe: func(timeout time.Duration) bool {
			won := e.probe(timeout)
			n, _, _ = e.reachable(false)
			return won
		},
		Changed: func(ctx context.Context, from, to breaker.State) {
			reachable := -1
			if from == breaker.HalfOpen {
				reachable = n
			}
			e.breakerChanged(ctx, from, to, reachable, nil)
		},
	})
}

// minProbeTimeout is the least time a probe waits for a node: it runs in
// the background and delays no caller, and a node slower than the
// attempts' per-node timeout is still reachable.
const minProbeTimeout = 500 * time.Millisecond

// probe sends a PING to every node, even to those skipped by their own
// breaker, and reports whether a quorum answered. The answers reset the
// nodes' counts of requests without reply.
func (e *engine) probe(timeout time.Duration) bool {
	round := newRound[bool](&e.wiring, e.majority, max(timeout, minProbeTimeout), quorum.Early)
	round.Force = true
	round.Call = func(ctx context.Context, n *quorum.Node) (bool, error) {
		_, err := n.Conn.Do(ctx, "PING")
		return true, err
	}
	round.Agree = func(ok bool) bool { return ok }
	return round.Run(context.Background(), &e.bg).Won
}

// stopBreaker stops the probe goroutine and wakes the obtains that wait
// for the breaker (they return ErrClosed); Close calls it before waiting
// for e.bg.
func (e *engine) stopBreaker() { e.brk.Stop() }

// waitBreaker waits until the breaker is closed, or ctx ends: then it
// returns the breaker's error (the caller joins ctx's).
func (e *engine) waitBreaker(ctx context.Context) error {
	if e.cfg.breaker.off {
		return nil
	}
	for {
		st, ch := e.brk.Changed()
		if st == breaker.Closed {
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
func (e *engine) breakerChanged(ctx context.Context, from, to breaker.State, reachable int, berr *QuorumError) {
	if !e.cfg.observed() {
		return
	}
	if reachable < 0 {
		reachable, _, _ = e.reachable(false)
	}
	if e.cfg.hook != nil {
		ev := BreakerEvent{From: breakerLabel(from), To: breakerLabel(to), Reachable: reachable, Need: e.majority.Need()}
		if berr != nil {
			ev.Err = berr
		}
		e.cfg.emit(ctx, ev)
	}
	lg := e.cfg.logger
	if lg == nil {
		return
	}
	switch {
	case from == breaker.Closed && to == breaker.Open:
		mode := "obtains fail at once (TryObtain) or wait (Obtain)"
		if e.cfg.fallback != nil {
			mode = "obtains of plain locks use the degraded mode's lease store"
		}
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: circuit breaker open: fewer than a quorum of nodes reachable; "+mode,
			slog.Int("reachable", reachable), slog.Int("need", e.majority.Need()), slog.String("reason", berr.Error()))
	case to == breaker.Closed:
		lg.LogAttrs(ctx, slog.LevelInfo, "redlock: circuit breaker closed: a quorum of nodes answered a probe",
			slog.Int("reachable", reachable), slog.Int("need", e.majority.Need()))
	}
}
