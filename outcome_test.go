package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
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
	if !h.Ended("r", 5) || !h.Ended("r", 5) || h.Ended("r", 5) {
		t.Error("two holds with one token did not end twice, and only twice")
	}
	if len(h.held) != 0 {
		t.Errorf("left %v", h.held)
	}
}
