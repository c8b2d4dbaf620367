package redlock

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Redis-free tests of the arrangement of late answers (lateAnswers,
// late.go; the Lock's mu guards it, so the tests but one are sequential)
// with a lock's Release: which nodes Release waits for, which
// answers leave their clean-up to it, and which clean up after
// themselves. The rounds that drive it on real nodes are tested in
// multi_test.go and the fault suite.

// chanClosed reports whether ch is closed, without blocking.
func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLateConfirm(t *testing.T) {
	var a lateAnswers
	a.confirm(5, func(i int) bool { return i == 0 || i == 3 })
	a.confirm(5, func(i int) bool { return i == 1 })
	if got := a.startRelease(); got != 0b01011 {
		t.Fatalf("confirmed %05b, want 01011 (every yes in time, of every round)", got)
	}
}

// A round with no answers to come at its decision: Release waits for no
// node, and an answer is never covered by it.
func TestLateNothingPending(t *testing.T) {
	var a lateAnswers
	if covered := a.arrive(1, false); covered {
		t.Fatal("an answer in time is covered by a release that has not begun")
	}
	a.startRelease()
	for i := range 3 {
		if ch := a.await(i); ch != nil {
			t.Fatalf("Release waits for node %d, whose answer was not pending", i)
		}
	}
	if a.waiting() != 0 || a.abandon(1) {
		t.Fatal("a release that waited for nothing has something to abandon")
	}
}

// Release waits for a pending node's answer; a definite answer then
// leaves its clean-up to the release (covered), and wakes it.
func TestLateReleaseWaitsForPendingAnswer(t *testing.T) {
	var a lateAnswers
	a.expect(0b110) // nodes 1 and 2 had not answered at the decision
	a.arrive(1, false)
	a.startRelease()
	if got := a.waiting(); got != 0b100 {
		t.Fatalf("Release waits for %03b, want 100: node 1's answer is in", got)
	}
	if ch := a.await(1); ch != nil {
		t.Fatal("Release waits for node 1, whose answer is in")
	}
	ch := a.await(2)
	if ch == nil || chanClosed(ch) {
		t.Fatal("Release does not wait for node 2's pending answer")
	}
	if again := a.await(2); again != ch {
		t.Fatal("two waits for the next answer got different channels")
	}
	if covered := a.arrive(2, false); !covered {
		t.Fatal("a definite answer that found the release waiting is not covered: both would clean up")
	}
	if !chanClosed(ch) {
		t.Fatal("the answer did not wake the waiting release")
	}
	if a.await(2) != nil {
		t.Fatal("Release still waits for node 2 after its answer")
	}
	// Release sends its request now: the answer is its to clean up, which
	// abandoning the wait (a request not sent after all) reports.
	if !a.abandon(2) {
		t.Fatal("abandon does not report the answer handed over to the release")
	}
}

// An answer without a definite outcome (a timeout) may have come before
// its request ran on the node: the release may still land first, so the
// answer cleans up after itself, even while the release waits.
func TestLateAmbiguousAnswerNotCovered(t *testing.T) {
	var a lateAnswers
	a.expect(0b1)
	a.startRelease()
	ch := a.await(0)
	if covered := a.arrive(0, true); covered {
		t.Fatal("an ambiguous answer is covered by the release")
	}
	if !chanClosed(ch) {
		t.Fatal("an ambiguous answer did not wake the waiting release")
	}
	if a.abandon(0) {
		t.Fatal("an ambiguous answer was handed over to the release")
	}
}

// Release stops waiting (its context ended) before the answer came: the
// answer, when it comes, is not covered and cleans up after itself.
func TestLateAbandonBeforeAnswer(t *testing.T) {
	var a lateAnswers
	a.expect(0b1)
	a.startRelease()
	if a.await(0) == nil {
		t.Fatal("Release does not wait for the pending answer")
	}
	if a.abandon(0) {
		t.Fatal("abandon reports an answer that has not come")
	}
	if covered := a.arrive(0, false); covered {
		t.Fatal("an answer after the release stopped waiting is covered")
	}
}

// An answer may come in before the won round's pending nodes are recorded
// (expect runs after the round returns): it counts as in.
func TestLateAnswerBeforeExpect(t *testing.T) {
	var a lateAnswers
	if covered := a.arrive(2, false); covered {
		t.Fatal("covered before any release")
	}
	a.expect(0b100)
	a.startRelease()
	if a.waiting() != 0 || a.await(2) != nil {
		t.Fatal("Release waits for an answer that came before expect")
	}
}

// Answers of several pending nodes, concurrent with Release's waits (under
// one mutex, as the Lock's mu): each wait ends, and every definite answer
// that came while it waited is covered exactly once.
func TestLateConcurrentAnswers(t *testing.T) {
	const nodes = 8
	var a lateAnswers
	var mu sync.Mutex
	locked := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }
	a.expect(1<<nodes - 1)
	a.startRelease()
	await := func(i int) (ch <-chan struct{}) { locked(func() { ch = a.await(i) }); return ch }
	var wg sync.WaitGroup
	var covered atomic.Int32
	for i := range nodes {
		wg.Go(func() {
			for ch := await(i); ch != nil; ch = await(i) {
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					t.Errorf("node %d: Release never woke", i)
					return
				}
			}
		})
		wg.Go(func() {
			var c bool
			locked(func() { c = a.arrive(i, false) })
			if c {
				covered.Add(1)
			}
		})
	}
	wg.Wait()
	handed := 0
	for i := range nodes {
		if a.abandon(i) {
			handed++
		}
	}
	if int(covered.Load()) != handed {
		t.Fatalf("%d answers covered, %d handed over: each covered answer must be the release's", covered.Load(), handed)
	}
}

func TestSplitTimeout(t *testing.T) {
	p := func(ms int) refreshPlan { return refreshPlan{timeout: time.Duration(ms) * time.Millisecond} }
	same := []refreshPlan{p(5), p(5), p(5)}
	g, rest := splitTimeout(same)
	if len(g) != 3 || rest != nil || &g[0] != &same[0] {
		t.Fatalf("one timeout: group %d rest %d, want the batch itself", len(g), len(rest))
	}
	g, rest = splitTimeout([]refreshPlan{p(5), p(9), p(5), p(7)})
	if len(g) != 2 || g[0].timeout != g[1].timeout || len(rest) != 2 || rest[0].timeout != 9*time.Millisecond || rest[1].timeout != 7*time.Millisecond {
		t.Fatalf("mixed: group %v rest %v", g, rest)
	}
}
