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

// circuit is the part of the engine that is its circuit breaker: the
// state machine (internal/breaker), and its admission, probes and wait.
type circuit struct {
	w        *wiring
	majority quorum.Rule // a quorum of reachable nodes closes it
	state    breaker.Breaker
}

func (b *circuit) failures() int {
	if f := b.w.cfg.breaker.failures; f > 0 {
		return f
	}
	return defaultBreakerFailures
}

func (b *circuit) cooldown() time.Duration {
	if d := b.w.cfg.breaker.cooldown; d > 0 {
		return d
	}
	return defaultBreakerCooldown
}

// reachable counts the nodes the breaker counts as reachable, and returns
// the reason of each other one when detail is set.
func (b *circuit) reachable(detail bool) (n int, up uint64, down []NodeResult) {
	limit := b.failures()
	now := b.w.cfg.now()
	for _, node := range b.w.nodes {
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

// refusal is asked before each acquire round: it returns nil when the
// round may go to the nodes, and the error to return instead (a
// *QuorumError matching ErrBreakerOpen) when the breaker is open, or opens
// now because fewer than a quorum of nodes are reachable. timeout is the
// round's per-node timeout, used by the probes. The caller holds the
// engine's life for reading and the Client is not closed.
func (b *circuit) refusal(ctx context.Context, timeout time.Duration) *QuorumError {
	if b.w.cfg.breaker.off {
		return nil
	}
	if b.state.State() == breaker.Closed {
		if _, up, _ := b.reachable(false); b.majority.Met(up) {
			return nil
		}
		b.open(ctx, timeout)
	}
	return b.refusalError()
}

// refusalError describes the breaker as it is now: the error of an obtain
// it refused.
func (b *circuit) refusalError() *QuorumError {
	n, _, down := b.reachable(true)
	st, at := b.state.NextProbe()
	next := time.Duration(0)
	if st == breaker.Open {
		next = max(at.Sub(b.w.cfg.now()), 0)
	}
	detail := " (probing now)"
	if st == breaker.Open {
		detail = fmt.Sprintf(" (next probe in %v)", next.Round(time.Millisecond))
	}
	return &QuorumError{Op: "obtain", Need: b.majority.Need(), Agreed: n, Nodes: down,
		sentinels: []error{ErrBreakerOpen, ErrNotObtained}, detail: ruleDetail(b.majority) + detail}
}

// refusedByBreaker reports whether an attempt's error is the breaker's
// refusal, made without an acquire round.
func refusedByBreaker(err error) bool {
	return errors.Is(err, ErrBreakerOpen)
}

// open opens a closed breaker and starts its probe loop, which
// b.w.bg owns and Close stops. The caller holds the engine's life for reading.
func (b *circuit) open(ctx context.Context, timeout time.Duration) {
	stop, ok := b.state.Open(b.w.cfg.now(), b.cooldown(), timeout)
	if !ok {
		return
	}
	b.w.bg.Go(func() { b.probeLoop(stop) })
	berr := b.refusalError()
	b.changed(ctx, breaker.Closed, breaker.Open, berr.Agreed, berr)
}

// probeLoop probes an open breaker every cooldown until a quorum of nodes
// answers (the breaker closes) or Close stops it.
func (b *circuit) probeLoop(stop <-chan struct{}) {
	n := -1 // the reachable nodes after the last probe
	b.state.ProbeLoop(stop, breaker.Prober{
		Cooldown: b.cooldown(),
		Now:      b.w.cfg.now,
		Probe: func(timeout time.Duration) bool {
			won := b.probe(timeout)
			n, _, _ = b.reachable(false)
			return won
		},
		Changed: func(ctx context.Context, from, to breaker.State) {
			reachable := -1
			if from == breaker.HalfOpen {
				reachable = n
			}
			b.changed(ctx, from, to, reachable, nil)
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
func (b *circuit) probe(timeout time.Duration) bool {
	round := newRound[bool](b.w, b.majority, max(timeout, minProbeTimeout), quorum.Early)
	round.Force = true
	round.Call = func(ctx context.Context, n *quorum.Node) (bool, error) {
		_, err := n.Conn.Do(ctx, "PING")
		return true, err
	}
	round.Agree = func(ok bool) bool { return ok }
	return round.Run(context.Background(), &b.w.bg).Won
}

// stop stops the probe goroutine and wakes the obtains that wait
// for the breaker (they return ErrClosed); Close calls it before waiting
// for b.w.bg.
func (b *circuit) stop() { b.state.Stop() }

// wait waits until the breaker is closed, or ctx ends: then it
// returns the breaker's error (the caller joins ctx's).
func (b *circuit) wait(ctx context.Context) error {
	if b.w.cfg.breaker.off {
		return nil
	}
	for {
		st, ch := b.state.Changed()
		if st == breaker.Closed {
			return nil
		}
		if b.w.reg.isClosed() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return b.refusalError()
		}
	}
}

// changed reports a change of state to the hook and the logger.
// reachable < 0 means not known (counted here).
func (b *circuit) changed(ctx context.Context, from, to breaker.State, reachable int, berr *QuorumError) {
	if !b.w.cfg.observed() {
		return
	}
	if reachable < 0 {
		reachable, _, _ = b.reachable(false)
	}
	if b.w.cfg.hook != nil {
		ev := BreakerEvent{From: breakerLabel(from), To: breakerLabel(to), Reachable: reachable, Need: b.majority.Need()}
		if berr != nil {
			ev.Err = berr
		}
		b.w.cfg.emit(ctx, ev)
	}
	lg := b.w.cfg.logger
	if lg == nil {
		return
	}
	switch {
	case from == breaker.Closed && to == breaker.Open:
		mode := "obtains fail at once (TryObtain) or wait (Obtain)"
		if b.w.cfg.fallback != nil {
			mode = "obtains of plain locks use the degraded mode's lease store"
		}
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: circuit breaker open: fewer than a quorum of nodes reachable; "+mode,
			slog.Int("reachable", reachable), slog.Int("need", b.majority.Need()), slog.String("reason", berr.Error()))
	case to == breaker.Closed:
		lg.LogAttrs(ctx, slog.LevelInfo, "redlock: circuit breaker closed: a quorum of nodes answered a probe",
			slog.Int("reachable", reachable), slog.Int("need", b.majority.Need()))
	}
}
