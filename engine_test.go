package redlock

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRegistry: the registry that Close releases holds each added lock
// once, whatever the order of adds and removes, each lock knowing its
// index in it (regAt); close hands over the locks still held, once.
func TestRegistry(t *testing.T) {
	r := registry{closing: make(chan struct{}), done: make(chan struct{})}
	locks := make([]*Lock, 8)
	for i := range locks {
		locks[i] = &Lock{}
	}
	in := map[*Lock]bool{} // what the registry should hold
	rng := rand.New(rand.NewPCG(51, 4))
	for step := range 2000 {
		l := locks[rng.IntN(len(locks))]
		if rng.IntN(2) == 0 {
			r.add(l)
			in[l] = true
		} else {
			r.remove(l)
			delete(in, l)
		}
		if len(r.held) != len(in) {
			t.Fatalf("step %d: %d locks held, want %d", step, len(r.held), len(in))
		}
		for i, h := range r.held {
			if !in[h] || h.regAt != int32(i+1) {
				t.Fatalf("step %d: held[%d] is in the registry %v, its regAt %d", step, i, in[h], h.regAt)
			}
		}
		for _, l := range locks {
			if !in[l] && l.regAt != 0 {
				t.Fatalf("step %d: a lock not held has regAt %d", step, l.regAt)
			}
		}
	}
	if r.isClosed() {
		t.Fatal("closed before close")
	}
	held, first := r.close()
	if !first || len(held) != len(in) {
		t.Fatalf("close: %d locks, first %v; want %d, true", len(held), first, len(in))
	}
	for l := range in {
		if !slices.Contains(held, releaser(l)) {
			t.Error("close left out a held lock")
		}
	}
	select {
	case <-r.closing:
	default:
		t.Error("closing not closed by close")
	}
	if !r.isClosed() {
		t.Error("not closed after close")
	}
	if held, first := r.close(); first || held != nil {
		t.Errorf("second close: %d locks, first %v; want none, false", len(held), first)
	}
}
