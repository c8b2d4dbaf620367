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
	quickRounds(t, n, &wg, 'a', "while the late request is out")
	close(release)
	<-res.Done
	if v := <-settled; v != "late" {
		t.Fatalf("late Settle got %q", v)
	}
	// And after it.
	quickRounds(t, n, &wg, 'A', "after the late reply")
}

// quickRounds runs 50 rounds on n, each answered at once with a reply of
// its own (letters from first), and checks that each got its own.
func quickRounds(t *testing.T, n *Node, wg *sync.WaitGroup, first rune, when string) {
	t.Helper()
	for i := range 50 {
		want := string(first + rune(i%26))
		r := &Round[string]{
			Nodes:   []*Node{n},
			Quorum:  Count(1),
			Timeout: time.Minute,
			Call:    func(context.Context, *Node) (string, error) { return want, nil },
			Agree:   func(v string) bool { return v != "" },
		}
		if res := r.Run(context.Background(), wg); !res.Won || res.Replies[0].Val != want {
			t.Fatalf("round %d %s: won %v, reply %q, want %q", i, when, res.Won, res.Replies[0].Val, want)
		}
	}
}
