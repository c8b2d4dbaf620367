package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

func TestEventResults(t *testing.T) {
	held := &QuorumError{Op: "obtain", Nodes: []NodeResult{{Err: ErrHeld}}}
	timeout := &QuorumError{Op: "obtain", Nodes: []NodeResult{{Err: ErrNodeTimeout}}}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, "obtained"},
		{ErrClosed, "closed"},
		{held, "held"},
		{errors.Join(held, context.DeadlineExceeded), "held"},
		{timeout, "no_quorum"},
		{errors.Join(ErrNotObtained, context.Canceled), "canceled"},
		{errors.Join(&QuorumError{Op: "obtain", Nodes: []NodeResult{{Err: context.DeadlineExceeded}}}, context.DeadlineExceeded), "canceled"},
		{errors.New("other"), "error"},
	} {
		if got := obtainResult(tt.err); string(got) != tt.want {
			t.Errorf("obtainResult(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	for _, tt := range []struct {
		e    AttemptEvent
		want string
	}{
		{AttemptEvent{Obtained: true}, "obtained"},
		{AttemptEvent{Err: held}, "held"},
		{AttemptEvent{Err: timeout}, "no_quorum"},
		{AttemptEvent{Err: errors.New("other")}, "error"},
	} {
		if got := attemptResult(tt.e.Obtained, tt.e.Err); string(got) != tt.want {
			t.Errorf("attemptResult(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
	notHeld := fmt.Errorf("%w: it was released", ErrNotHeld)
	for _, tt := range []struct {
		err          error
		refresh, rel string
	}{
		{nil, "ok", "ok"},
		{notHeld, "not_held", "not_held"},
		{ErrClosed, "closed", "failed"},
		{&QuorumError{Op: "refresh"}, "failed", "failed"},
	} {
		if got := refreshResult(tt.err); string(got) != tt.refresh {
			t.Errorf("refreshResult(%v) = %q, want %q", tt.err, got, tt.refresh)
		}
		if got := releaseResult(tt.err); string(got) != tt.rel {
			t.Errorf("releaseResult(%v) = %q, want %q", tt.err, got, tt.rel)
		}
	}
}

func TestNodeReason(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{ErrHeld, "held"},
		{ErrNotOwner, "not_owner"},
		{recoveringError(time.Second, time.Minute), "recovering"},
		{fmt.Errorf("%w: REDLOCK_KIND", ErrWrongKind), "wrong_kind"},
		{ErrNodeTimeout, "timeout"},
		{ErrNodePending, "pending"},
		{ErrNodeSkipped, "skipped"},
		{quorum.ErrOverloaded, "skipped"},
		{ErrNotReplicated, "not_replicated"},
		{errors.New("NOPERM"), "error"},
	} {
		if got := reason(tt.err); string(got) != tt.want {
			t.Errorf("reason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestCertainlyNotOurs: the one rule for a lock the nodes say is no longer
// held. On five nodes (quorum three) it takes three "not ours" answers that
// are evidence; errors and the answers of nodes outside the evidence do not
// count. A permit's quorum (limits.PermitQuorum) is the lock's own.
func TestCertainlyNotOurs(t *testing.T) {
	e := &engine{wiring: wiring{nodes: make([]*quorum.Node, 5)}, majority: quorum.Count(3)}
	gone := func(v bool) bool { return v }
	reply := func(notOurs bool, err error) quorum.Reply[bool] { return quorum.Reply[bool]{Val: notOurs, Err: err} }
	timeout := errors.New("timeout")
	for _, tc := range []struct {
		name     string
		replies  []quorum.Reply[bool]
		evidence uint64
		want     bool
	}{
		{"two of five", []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(false, nil), reply(false, nil), reply(false, nil)}, everyNode, false},
		{"three of five", []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(true, nil), reply(false, nil), reply(false, nil)}, everyNode, true},
		{"errors do not count", []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(true, timeout), reply(false, timeout), reply(false, nil)}, everyNode, false},
		{"unconfirmed nodes do not count", []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(true, nil), reply(true, nil), reply(false, nil)}, 0b00011, false},
		{"three confirmed", []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(true, nil), reply(false, nil), reply(false, nil)}, 0b00111, true},
	} {
		if got := certainlyNotOurs(&Lock{e: e, quorum: &e.majority}, tc.replies, gone, tc.evidence); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A permit of a semaphore of two permits needs four of five nodes: two
	// "not ours" already leave fewer than four that could agree.
	permitRule := quorum.Count(limits.PermitQuorum(5, 2))
	permit := &Lock{e: e, quorum: &permitRule}
	two := []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(false, nil), reply(false, nil), reply(false, nil)}
	if !certainlyNotOurs(permit, two, gone, everyNode) {
		t.Error("permit of 2 on 5 nodes: two of five not ours is not certain")
	}
	if certainlyNotOurs(permit, two[:1:1], gone, everyNode) {
		t.Error("permit of 2 on 5 nodes: one not ours is certain")
	}
}
