package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestTokensIncreaseAcrossClients(t *testing.T) {
	cl := startNodes(t, 5)
	clients := []*Client{newClient(t, cl.clients), newClient(t, cl.clients), newClient(t, cl.clients)}
	ctx := context.Background()
	var last int64
	for i := range 150 {
		c := clients[i%len(clients)]
		l, err := c.Obtain(ctx, "fenced", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// isPublishingRelease recognises Release's own release.lua, which
// publishes (a clean-up does not).
func isPublishingRelease(cmd redis.Cmder) bool {
	_, flag, ok := isRelease(cmd)
	return ok && flag != ""
}

// The second round runs when the yes-votes disagree, and leaves a quorum of
// counters at the token; once the counters agree, an acquire takes one round.
func TestFencingSecondRound(t *testing.T) {
	cl := startNodes(t, 5)
	var acquires, fences, releases atomic.Int32 // successful script runs, on any node
	for _, n := range cl.clients {
		n.AddHook(onEval(func(cmd redis.Cmder, err error) {
			if err != nil {
				return
			}
			switch args := cmd.Args(); {
			case len(args) == 8 && strings.HasSuffix(fmt.Sprint(args[3]), ":fence"):
				fences.Add(1) // fence.lua: two keys, three arguments
			case len(args) == 13:
				acquires.Add(1) // acquire.lua: three keys, seven arguments
			case isPublishingRelease(cmd):
				releases.Add(1) // release.lua publishing: Release's own
			}
		}))
	}
	c := newClient(t, cl.clients, WithNodeTimeout(time.Second))
	ctx := context.Background()
	// Counters far apart: node 4 well ahead of the others.
	for i, n := range cl.clients {
		if err := n.Set(ctx, "{redlock:second}:fence", 1000*(i+1), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	obtained := 0
	// settled waits until every node has run every acquire, second round
	// and release sent so far: the late replies have landed. (Release
	// returns at a quorum; a node that still holds the last owner's key
	// refuses the next acquire, and its counter falls behind.)
	released := 0
	settled := func() {
		t.Helper()
		eventually(t, "every node ran every acquire, fence and release", func() bool {
			return acquires.Load() == int32(5*obtained) && fences.Load()%5 == 0 && releases.Load() == int32(5*released)
		})
	}
	l, err := c.TryObtain(ctx, "second", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	obtained++
	if fences.Load() == 0 {
		t.Fatal("the yes-votes disagreed, but no second round ran")
	}
	atLeast := 0
	for _, n := range cl.clients {
		if v, _ := n.Get(ctx, "{redlock:second}:fence").Int64(); v >= l.Token() {
			atLeast++
		}
	}
	if atLeast < c.e.majority.Need() {
		t.Fatalf("%d nodes hold a counter at least the token %d, want a quorum", atLeast, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released++
	last := l.Token()
	acquire := func() (secondRounds int32) {
		t.Helper()
		settled()
		before := fences.Load()
		next, err := c.TryObtain(ctx, "second", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		obtained++
		if next.Token() <= last {
			t.Fatalf("token %d after %d", next.Token(), last)
		}
		last = next.Token()
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		released++
		settled()
		return (fences.Load() - before) / 5
	}
	// Every acquire adds one to each counter, and a second round lifts
	// every counter to the highest among the first yes-votes, never
	// lowering one: the counters converge once the highest node's vote is
	// among the first (which reply order decides, so the number of
	// acquisitions this takes varies).
	agree := func() bool {
		var first int64
		for i, n := range cl.clients {
			v, err := n.Get(ctx, "{redlock:second}:fence").Int64()
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = v
			} else if v != first {
				return false
			}
		}
		return true
	}
	for i := 0; !agree(); i++ {
		if i == 200 {
			t.Fatal("the counters still disagree after 200 acquisitions")
		}
		acquire()
	}
	for i := range 10 {
		if n := acquire(); n != 0 {
			t.Fatalf("acquire %d after the counters agreed ran %d second rounds, want none", i, n)
		}
	}
}

func TestFreshNodeIsRecovering(t *testing.T) {
	cl := startNodes(t, 1)
	// Default guard and recovery window, as a first-time user has them.
	c, err := New(cl.clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.TryObtain(context.Background(), "first", 10*time.Second)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain on a node started just now: %v, want ErrNodeRecovering", err)
	}
	for _, want := range []string{"recovering after a restart", "for another", "docs/fencing.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// With a short window, Obtain simply waits it out. (A new node: the
	// first one's record holds the one-minute window; every client of a
	// deployment must use the same WithMaxTTL.)
	fresh := startNodes(t, 1)
	short := newClient(t, fresh.clients, WithMaxTTL(2*time.Second), WithRestartGuard(GuardOn))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := short.Obtain(ctx, "first", time.Second)
	if err != nil {
		t.Fatalf("Obtain through the recovery window: %v", err)
	}
	_ = l.Release(ctx)
}

// Several clients take one lock 500 times while nodes 0 and 1 (a minority)
// are killed and restarted empty again and again: tokens increase strictly,
// a restarted node answers "recovering" for the recovery window, and
// acquisitions go on with the other three.
func TestTokensIncreaseThroughMinorityRestarts(t *testing.T) {
	const maxTTL = 3 * time.Second
	cl := startNodes(t, 5)
	clients := make([]*Client, 3)
	for i := range clients {
		clients[i] = guarded(t, cl.clients, maxTTL)
	}
	var (
		mu       sync.Mutex
		tokens   []int64
		stop     = make(chan struct{})
		restarts atomic.Int32
		sawRecov atomic.Int32
		voted    atomic.Int32 // restarted nodes that voted at once: must stay 0
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		ticker := time.NewTicker(300 * time.Millisecond)
		defer ticker.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			i := n % 2
			if err := cl.servers[i].Restart(); err != nil {
				t.Errorf("restart node %d: %v", i, err)
				return
			}
			restarts.Add(1)
			// Right after its restart the node refuses to vote. (A probe
			// can also meet a connection broken by the restart: retry.)
			restartedAt := time.Now()
			probe := newProbe(t, cl.clients[i], maxTTL)
			for range 20 {
				l, err := probe.TryObtain(context.Background(), "probe", 500*time.Millisecond)
				if err == nil {
					voted.Add(1)
					t.Errorf("node %d voted %v after its restart, within the %v recovery window", i, time.Since(restartedAt), maxTTL)
					_ = l.Release(context.Background())
					break
				}
				if errors.Is(err, ErrNodeRecovering) {
					sawRecov.Add(1)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	var work sync.WaitGroup
	var count atomic.Int32
	for _, c := range clients {
		work.Go(func() {
			for count.Add(1) <= 500 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := c.Obtain(ctx, "restarts", maxTTL)
				cancel()
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				_ = l.Release(context.Background())
			}
		})
	}
	work.Wait()
	close(stop)
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("acquisition %d: token %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	if len(tokens) < 500 || restarts.Load() == 0 || sawRecov.Load() == 0 || voted.Load() != 0 {
		t.Fatalf("%d acquisitions, %d restarts, %d restarted nodes seen recovering, %d voting at once; want 500, some, some, none",
			len(tokens), restarts.Load(), sawRecov.Load(), voted.Load())
	}
	t.Logf("%d acquisitions through %d restarts", len(tokens), restarts.Load())
}

// newProbe is a single-node Client with the guard on, to ask one node
// whether it recovers.
func newProbe(t *testing.T, node redis.UniversalClient, maxTTL time.Duration) *Client {
	t.Helper()
	c, err := New([]redis.UniversalClient{node}, WithMaxTTL(maxTTL), WithNodeTimeout(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestMajorityRestartRecovers(t *testing.T) {
	const maxTTL = 2 * time.Second
	cl := startNodes(t, 5)
	c := guarded(t, cl.clients, maxTTL)
	ctx := context.Background()
	before, err := c.TryObtain(ctx, "majority", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = before.Release(ctx)
	restarted := []int{0, 2, 4}
	for _, i := range restarted {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.TryObtain(ctx, "majority", time.Second)
	var qe *QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain with a majority just restarted: %v, want a *QuorumError naming recovering nodes", err)
	}
	var recovering []int
	for _, ne := range qe.Nodes {
		if errors.Is(ne.Err, ErrNodeRecovering) {
			recovering = append(recovering, ne.Node)
		}
	}
	if fmt.Sprint(recovering) != fmt.Sprint(restarted) {
		t.Fatalf("recovering nodes %v, want %v (%v)", recovering, restarted, err)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	after, err := c.Obtain(wctx, "majority", time.Second)
	if err != nil {
		t.Fatalf("Obtain after the recovery window: %v", err)
	}
	if waited := time.Since(start); waited < maxTTL/2 {
		t.Errorf("obtained after %v, before the recovery window could end", waited)
	}
	if after.Token() <= before.Token() {
		t.Fatalf("token %d after the restart, %d before: want larger", after.Token(), before.Token())
	}
	_ = after.Release(ctx)
}
