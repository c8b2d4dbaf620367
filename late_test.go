package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/script"
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

// A node's yes that arrives after the attempt failed is released. The late
// node's client does not abort reads at the context deadline, so its reply
// arrives after the decision, when the node resumes.
// A yes that comes after the acquire was decided, and after the lock's
// Release began, may have set the key after the release's delete on its
// node: it deletes its key itself.
func TestLateYesAfterReleaseIsReleased(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	// Node 2's client waits for replies past the node timeout, so that the
	// frozen node's acquire reply comes back, late.
	late := redis.NewClient(&redis.Options{Addr: cl.servers[2].Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1, PoolSize: 2})
	t.Cleanup(func() { _ = late.Close() })
	warm := script.Keys{Lock: "{redlock:warm-up}", Fence: "{redlock:warm-up}:fence", Epoch: "{redlock:}:epoch"}
	for range 2 { // two open connections, the scripts loaded
		if _, err := script.Acquire(ctx, goredis.New(late), warm, "x", time.Second, script.Guard{Mode: '0', FenceTTL: time.Hour}, script.Ack{}); err != nil {
			t.Fatal(err)
		}
		if _, err := script.Release(ctx, goredis.New(late), warm.Lock, "x", script.Retire{Fence: warm.Fence}, false, false); err != nil {
			t.Fatal(err)
		}
	}
	// The late yes's key is deleted by a request sent after it: the
	// release, when it was still waiting for the acquire's answer, or
	// the answer's own clean-up (release.lua without publishing).
	var releases, resumedAt atomic.Int64
	late.AddHook(onEval(func(cmd redis.Cmder, err error) {
		if key, _, ok := isRelease(cmd); err == nil && ok && key == "{redlock:late-release}" && resumedAt.Load() != 0 {
			releases.Add(1)
		}
	}))
	nodes := slices.Clone(cl.clients)
	nodes[2] = late
	c := newClient(t, nodes, WithNodeTimeout(300*time.Millisecond))
	if err := cl.servers[2].Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = cl.servers[2].Resume()
		}
	})
	l, err := c.TryObtain(ctx, "late-release", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain with one node of three frozen: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with one node of three frozen: %v", err)
	}
	resumedAt.Store(time.Now().UnixNano())
	if err := cl.servers[2].Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	eventually(t, "a release request after the late yes", func() bool { return releases.Load() >= 1 })
	eventually(t, "node 2 drops the key", func() bool {
		_, ok := rawGet(t, cl.clients[2], "late-release")
		return !ok
	})
}

// A node that had not answered the acquire when it was decided gets the
// release after its answer: the release deletes the key its acquire set,
// with no clean-up request of its own.
func TestReleaseWaitsForTheAcquiresLateAnswer(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	var acquired atomic.Bool
	var withChannel, cleanups atomic.Int32
	cl.clients[2].AddHook(onEval(func(cmd redis.Cmder, err error) {
		key, flag, release := isRelease(cmd)
		switch {
		case err != nil:
		case isAcquire(cmd) && !acquired.Load():
			// The acquire ran on the node; its answer comes late.
			time.Sleep(300 * time.Millisecond)
			acquired.Store(true)
		case !release || key != "{redlock:late-answer}":
			// Not a release of the lock (a fencing round's raise).
		case flag == "":
			cleanups.Add(1)
		default:
			withChannel.Add(1)
		}
	}))
	c := newClient(t, cl.clients, WithNodeTimeout(5*time.Second))
	l, err := c.TryObtain(ctx, "late-answer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if acquired.Load() {
		t.Skip("node 2 answered in time: the machine is too slow for this test's 300 ms")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 2's release after its late answer", func() bool { return withChannel.Load() == 1 })
	if !acquired.Load() {
		t.Fatal("node 2 was sent the release before its acquire answered")
	}
	for i := range cl.clients {
		if _, ok := rawGet(t, cl.clients[i], "late-answer"); ok {
			t.Errorf("node %d still holds the released lock", i)
		}
	}
	if n := cleanups.Load(); n != 0 {
		t.Errorf("%d clean-up requests; want none, the release covers the late answer", n)
	}
}

func TestLateYesAfterFailureIsReleased(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	late := redis.NewClient(&redis.Options{Addr: cl.servers[4].Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = late.Close() })
	// An open connection and a loaded script, so that the acquire is
	// written to the paused node and runs there when it resumes.
	if err := late.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	warm := script.Keys{Lock: "{redlock:warm-up}", Fence: "{redlock:warm-up}:fence", Epoch: "{redlock:}:epoch"}
	if _, err := script.Acquire(ctx, goredis.New(late), warm, "x", time.Second, script.Guard{Mode: '0', FenceTTL: time.Hour}, script.Ack{}); err != nil {
		t.Fatal(err)
	}
	// The acquire's reply, read after its deadline, is not reliable
	// (go-redis may hand back a nil value); what the test can observe is the
	// clean-up: a release on node 4 that deleted our key.
	var cleaned atomic.Int32
	late.AddHook(onEval(func(cmd redis.Cmder, _ error) {
		if a, ok := cmd.(*redis.Cmd); ok && a.Err() == nil {
			if _, flag, ok := isRelease(cmd); ok && flag == "" { // a clean-up: no publishing
				if n, err := a.Int64(); err == nil && n&1 == 1 {
					cleaned.Add(1) // deleted + 2 x receivers from release.lua: deleted
				}
			}
		}
	}))
	nodes := slices.Clone(cl.clients)
	nodes[4] = late
	c := newClient(t, nodes, WithNodeTimeout(300*time.Millisecond))
	// Every node identified before node 4 freezes (identity.go): without
	// records (these tests' default) an acquire reads the identity of a
	// node not yet identified in its own pipeline, and the first such
	// read waits for the nodes still to answer (awaitReads); with records,
	// the first contact's INFO would hold node 4's one connection, and the
	// acquire would never be written there.
	warmed, err := c.TryObtain(ctx, "first-contact", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := warmed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The first read does not wait for a node that answers after a
	// quorum did past a short grace, nor past the node timeout. On a
	// loaded machine node 4's answer can take that long: wait until it is
	// learned, so that the acquire under test is not the first read.
	eventually(t, "node 4 is identified", func() bool {
		s := &c.e.ident
		s.mu.Lock()
		known := s.ids[4] != nil
		if !known {
			s.asked[4] = time.Time{} // asked again by the next acquire
		}
		s.mu.Unlock()
		if !known {
			if l, err := c.TryObtain(ctx, "first-contact", time.Minute); err == nil {
				_ = l.Release(ctx)
			}
		}
		return known
	})
	// Another owner holds the key on nodes 0 and 1: with node 4 frozen the
	// outcome is open until node 4's timeout, and then fails.
	for _, i := range []int{0, 1} {
		if err := cl.clients[i].Set(ctx, "{redlock:late}", "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The warm-up's rounds were decided by a quorum, and a request of
	// theirs to node 4 (its second round, the raise, or its release) may
	// not even have been written yet: frozen with node 4, it would hold
	// node 4's one connection, and the acquire under test would never be
	// written there (seen under load: the raise ran after the resume, and
	// no late yes came).
	eventually(t, "no request to node 4 in flight", func() bool { return c.e.nodes[4].InFlight() == 0 })
	cl.pause(t, 4)
	_, err = c.TryObtain(ctx, "late", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("TryObtain: %v, want ErrNotObtained with a node timeout", err)
	}
	for _, i := range []int{2, 3} {
		if _, ok := rawGet(t, cl.clients[i], "late"); ok {
			t.Errorf("node %d kept the key of the failed attempt", i)
		}
	}
	// The request is still waiting on node 4. Resume it: the acquire runs
	// there (a late yes), and the clean-up must delete it again.
	if err := cl.servers[4].Resume(); err != nil {
		t.Fatal(err)
	}
	// At least one, then exactly one: a count above one fails with the
	// count (a CI run once timed out here on == 1, which a second counted
	// clean-up would explain, and did not say).
	eventually(t, "the clean-up deletes the late yes on node 4", func() bool { return cleaned.Load() >= 1 })
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok := rawGet(t, cl.clients[4], "late")
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 4 still holds the late yes %q", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := cleaned.Load(); n != 1 {
		t.Errorf("%d clean-ups deleted the late yes on node 4, want 1", n)
	}
}
