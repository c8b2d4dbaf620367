package redlockprom

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-go/redlock"
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
		if got := obtainResult(tt.err); got != tt.want {
			t.Errorf("obtainResult(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got := refreshResult(fmt.Errorf("%w: it was released", redlock.ErrNotHeld)); got != "not_held" {
		t.Errorf("refreshResult of ErrNotHeld = %q", got)
	}
	if got := refreshResult(&redlock.QuorumError{Op: "refresh"}); got != "failed" {
		t.Errorf("refreshResult of a QuorumError without ErrNotHeld = %q", got)
	}
}

func TestHoldings(t *testing.T) {
	var h holdings
	h.obtained("a")
	h.obtained("b")
	if !h.lost("a") {
		t.Error("loss of a held lock not counted")
	}
	if h.released("a") {
		t.Error("release of a lost lock ended a hold again")
	}
	// A Release event ahead of the Lost event of the same lock.
	if !h.released("b") {
		t.Error("release of a held lock not counted")
	}
	if h.lost("b") {
		t.Error("loss of a released lock counted")
	}
	if h.released("c") {
		t.Error("release of an unknown lock counted")
	}
	if len(h.held) != 0 || len(h.gone) != 0 {
		t.Errorf("left %v %v, want nothing", h.held, h.gone)
	}
}
