package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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
