package redlockprom

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/hookstate"
)

func TestObtainResult(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "obtained"},
		{redlock.ErrClosed, "closed"},
		{&redlock.QuorumError{Op: "obtain", Nodes: []*redlock.NodeError{{Err: redlock.ErrHeld}}}, "held"},
		{errors.Join(&redlock.QuorumError{Op: "obtain", Nodes: []*redlock.NodeError{{Err: redlock.ErrHeld}}}, context.DeadlineExceeded), "held"},
		{&redlock.QuorumError{Op: "obtain", Nodes: []*redlock.NodeError{{Err: redlock.ErrNodeTimeout}}}, "no_quorum"},
		{errors.Join(redlock.ErrNotObtained, context.Canceled), "canceled"},
		{errors.Join(&redlock.QuorumError{Op: "obtain", Nodes: []*redlock.NodeError{{Err: context.DeadlineExceeded}}}, context.DeadlineExceeded), "canceled"},
		{errors.New("other"), "error"},
	}
	for _, tt := range tests {
		if got := hookstate.ObtainResult(tt.err); got != tt.want {
			t.Errorf("obtainResult(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got := hookstate.RefreshResult(fmt.Errorf("%w: it was released", redlock.ErrNotHeld)); got != "not_held" {
		t.Errorf("refreshResult of ErrNotHeld = %q", got)
	}
	if got := hookstate.RefreshResult(&redlock.QuorumError{Op: "refresh"}); got != "failed" {
		t.Errorf("refreshResult of a QuorumError without ErrNotHeld = %q", got)
	}
}
