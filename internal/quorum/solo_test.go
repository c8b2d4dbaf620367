package quorum

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A round of one node whose client does not honour deadlines (runSolo)
// reuses its request's state: a reply that comes after the round's
// deadline is settled as late, and the rounds after it get their own
// replies, not the late one.
func TestSoloLateReplyThenReuse(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	n := NewNode(0, nil, 0)
	release := make(chan struct{})
	settled := make(chan string, 1)
	late := &Round[string]{
		Nodes:   []*Node{n},
		Quorum:  Count(1),
		Timeout: 20 * time.Millisecond,
		Call: func(context.Context, *Node) (string, error) {
			<-release // ignores its context, as such a client does
			return "late", nil
		},
		Agree: func(v string) bool { return v != "" },
		Settle: func(_ *Node, v string, err error, won, isLate bool) {
			if err != nil || won || !isLate {
				t.Errorf("Settle(%q, %v, won %v, late %v), want a late lost reply", v, err, won, isLate)
			}
			settled <- v
		},
	}
	res := late.Run(context.Background(), &wg)
	if res.Won || res.Pending != 1 || !errors.Is(res.Replies[0].Err, ErrTimeout) {
		t.Fatalf("timed-out round: won %v, pending %b, err %v", res.Won, res.Pending, res.Replies[0].Err)
	}
	// Rounds while the late request is still out.
	for i := range 50 {
		want := string(rune('a' + i%26))
		r := &Round[string]{
			Nodes:   []*Node{n},
			Quorum:  Count(1),
			Timeout: time.Minute,
			Call:    func(context.Context, *Node) (string, error) { return want, nil },
			Agree:   func(v string) bool { return v != "" },
		}
		res := r.Run(context.Background(), &wg)
		if !res.Won || res.Replies[0].Val != want {
			t.Fatalf("round %d: won %v, reply %q, want %q", i, res.Won, res.Replies[0].Val, want)
		}
	}
	close(release)
	<-res.Done
	if v := <-settled; v != "late" {
		t.Fatalf("late Settle got %q", v)
	}
	// And after it.
	for i := range 50 {
		want := string(rune('A' + i%26))
		r := &Round[string]{
			Nodes:   []*Node{n},
			Quorum:  Count(1),
			Timeout: time.Minute,
			Call:    func(context.Context, *Node) (string, error) { return want, nil },
			Agree:   func(v string) bool { return v != "" },
		}
		if res := r.Run(context.Background(), &wg); !res.Won || res.Replies[0].Val != want {
			t.Fatalf("round %d after the late reply: won %v, reply %q, want %q", i, res.Won, res.Replies[0].Val, want)
		}
	}
}
