package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-go/redlock/internal/quorum"
)

func TestEventResults(t *testing.T) {
	held := &QuorumError{Op: "obtain", Nodes: []*NodeError{{Err: ErrHeld}}}
	timeout := &QuorumError{Op: "obtain", Nodes: []*NodeError{{Err: ErrNodeTimeout}}}
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
		{errors.Join(&QuorumError{Op: "obtain", Nodes: []*NodeError{{Err: context.DeadlineExceeded}}}, context.DeadlineExceeded), "canceled"},
		{errors.New("other"), "error"},
	} {
		if got := (ObtainEvent{Err: tt.err}).Result(); got != tt.want {
			t.Errorf("ObtainEvent{Err: %v}.Result() = %q, want %q", tt.err, got, tt.want)
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
		if got := tt.e.Result(); got != tt.want {
			t.Errorf("%+v.Result() = %q, want %q", tt.e, got, tt.want)
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
		if got := (RefreshEvent{Err: tt.err}).Result(); got != tt.refresh {
			t.Errorf("RefreshEvent{Err: %v}.Result() = %q, want %q", tt.err, got, tt.refresh)
		}
		if got := (ReleaseEvent{Err: tt.err}).Result(); got != tt.rel {
			t.Errorf("ReleaseEvent{Err: %v}.Result() = %q, want %q", tt.err, got, tt.rel)
		}
	}
}

func TestNodeErrorKind(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{ErrHeld, "held"},
		{ErrNotOwner, "not_owner"},
		{&RecoveringError{}, "recovering"},
		{ErrNodeTimeout, "timeout"},
		{ErrNodePending, "pending"},
		{ErrNodeSkipped, "skipped"},
		{ErrNodeOverloaded, "overloaded"},
		{ErrNotReplicated, "not_replicated"},
		{errors.New("NOPERM"), "error"},
	} {
		if got := NodeErrorKind(tt.err); got != tt.want {
			t.Errorf("NodeErrorKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestHeldLocks(t *testing.T) {
	var h HeldLocks
	h.Obtained("a", 1)
	h.Obtained("b", 1)
	h.Obtained("a", 2) // another lock of the name (another Client)
	if !h.Ended("a", 1) || h.Ended("a", 1) {
		t.Error("a lock's second end (its release after its loss) was counted")
	}
	if !h.Ended("b", 1) || h.Ended("b", 1) {
		t.Error("a loss reported after the release ended the hold again")
	}
	if h.Ended("c", 1) {
		t.Error("the release of a lock never obtained ended a hold")
	}
	if !h.Ended("a", 2) {
		t.Error("the other lock of a name was no longer held")
	}
	if len(h.held) != 0 {
		t.Errorf("left %v", h.held)
	}

	// Two holds of a reentrant owner share a token: each end counts once.
	h.Obtained("r", 5)
	h.Obtained("r", 5)
	first, second, third := h.Ended("r", 5), h.Ended("r", 5), h.Ended("r", 5)
	if !first || !second || third {
		t.Error("two holds with one token did not end twice, and only twice")
	}
	if len(h.held) != 0 {
		t.Errorf("left %v", h.held)
	}
}

// TestCertainlyNotOurs: the one rule for a lock the nodes say is no longer
// held. On five nodes (quorum three) it takes three "not ours" answers that
// are evidence; errors and the answers of nodes outside the evidence do not
// count. A permit's quorum (PermitQuorum) is the lock's own.
func TestCertainlyNotOurs(t *testing.T) {
	c := &Client{nodes: make([]*quorum.Node, 5), quorum: 3}
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
		if got := certainlyNotOurs(&Lock{c: c, quorum: c.quorum}, tc.replies, gone, tc.evidence); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A permit of a semaphore of two permits needs four of five nodes: two
	// "not ours" already leave fewer than four that could agree.
	permit := &Lock{c: c, quorum: PermitQuorum(5, 2)}
	two := []quorum.Reply[bool]{reply(true, nil), reply(true, nil), reply(false, nil), reply(false, nil), reply(false, nil)}
	if !certainlyNotOurs(permit, two, gone, everyNode) {
		t.Error("permit of 2 on 5 nodes: two of five not ours is not certain")
	}
	if certainlyNotOurs(permit, two[:1:1], gone, everyNode) {
		t.Error("permit of 2 on 5 nodes: one not ours is certain")
	}
}
