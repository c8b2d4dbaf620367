//go:build !race

package quorum

import (
	"context"
	"testing"
	"time"
)

// A round of one node whose client does not honour deadlines allocates
// its reply and its request context together (solo), and nothing for its request's
// goroutine and reply channel (pooled: soloCall), nor for the Round, which
// stays on its caller's stack (Run copies what the requests use of it).
// Not under -race, whose sync.Pool drops some of what it is given.
func TestSoloRoundAllocs(t *testing.T) {
	h := newHandoff(t)
	nodes := []*Node{NewNode(0, nil, 0)}
	ctx := context.Background()
	if got := testing.AllocsPerRun(1000, func() {
		r := Round[bool]{
			Nodes:   nodes,
			Quorum:  Count(1),
			Timeout: time.Minute,
			Call:    func(context.Context, *Node) (bool, error) { return true, nil },
			Agree:   func(v bool) bool { return v },
		}
		if !r.Run(ctx, h).Won {
			t.Fatal("lost")
		}
	}); got != 1 {
		t.Fatalf("%v allocations per round, want 1", got)
	}
}

// handoff is a Spawner that hands each function to one goroutine of its
// own, which runs them in turn: it allocates nothing per function.
type handoff chan func()

func newHandoff(t *testing.T) handoff {
	h := make(handoff)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range h {
			f()
		}
	}()
	t.Cleanup(func() { close(h); <-done })
	return h
}

func (h handoff) Go(f func()) { h <- f }
