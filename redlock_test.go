package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; tests kill nodes on purpose.
	redis.SetLogger(quietLogger{})
	switch os.Getenv("REDLOCK_CHILD") {
	case "paused":
		os.Exit(pausedChild())
	case "resume":
		os.Exit(resumeChild())
	}
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// cluster is a set of real redis-server processes and a client for each.
type cluster struct {
	servers []*redistest.Server
	clients []redis.UniversalClient
}

// pause stops the given nodes' processes (SIGSTOP) until the test ends, or
// until a Resume before that.
func (cl *cluster) pause(t testing.TB, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		if err := cl.servers[i].Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.servers[i].Resume() })
	}
}

func startNodes(t testing.TB, n int) *cluster {
	t.Helper()
	cl := &cluster{servers: redistest.Start(t, n)}
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cl.clients = append(cl.clients, c)
	}
	return cl
}

// newClient returns a Client closed at the end of the test. Unless opts say
// otherwise, its node timeout is 250 ms (the defaults derived from short
// test TTLs, 10 ms, are too tight for a loaded machine under -race) and the
// restart guard is off: the test's servers were just started, and would
// recover for a minute. The guard's own tests turn it on. So are the
// configuration records, whose script call on each node before the first
// obtain would meet the frozen and paused nodes of other tests; their own
// tests (joint_test.go) turn them on.
func newClient(t *testing.T, nodes []redis.UniversalClient, opts ...Option) *Client {
	t.Helper()
	defaults := []Option{WithNodeTimeout(250 * time.Millisecond), WithRestartGuard(GuardOff), WithConfigRecords(false)}
	c, err := New(nodes, append(defaults, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawGet reads a lock's key on one node directly.
func rawGet(t *testing.T, node redis.UniversalClient, name string) (string, bool) {
	t.Helper()
	v, err := node.Get(context.Background(), "{"+limits.Prefix+name+"}").Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	return v, true
}

func TestOneWinnerAmongMany(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			// Generous node timeout: 100 goroutines on two cores under
			// -race must not turn into spurious timeouts.
			c := newClient(t, cl.clients, WithNodeTimeout(2*time.Second))
			var (
				wg      sync.WaitGroup
				winners atomic.Int32
				start   = make(chan struct{})
				errs    = make(chan error, 100)
			)
			for range 100 {
				wg.Go(func() {
					<-start
					// With 5 nodes, simultaneous attempts can split the
					// votes so that none wins; Obtain retries until one
					// does. The others give up when their context ends.
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					_, err := c.Obtain(ctx, "one-winner", time.Minute)
					if err == nil {
						winners.Add(1)
					} else if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
						errs <- err
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("loser got an unexpected error: %v", err)
			}
			if got := winners.Load(); got != 1 {
				t.Fatalf("%d winners, want exactly 1", got)
			}
		})
	}
}

func TestObtainReleaseCycle(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			lock, err := c.TryObtain(ctx, "order:42", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if lock.Name() != "order:42" {
				t.Errorf("Key() = %q", lock.Name())
			}
			if left := time.Until(lock.ValidUntil()); left <= 9*time.Second || left > 10*time.Second {
				t.Errorf("validity left %v, want in (9s, 10s]", left)
			}
			// Obtain returns at quorum; the other nodes' yes arrives
			// later and joins the lock.
			for i, node := range cl.clients {
				eventually(t, fmt.Sprintf("node %d has the key", i), func() bool {
					v, ok := rawGet(t, node, "order:42")
					return ok && len(v) == 32
				})
			}
			if _, err := c.TryObtain(ctx, "order:42", 10*time.Second); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("second TryObtain: %v, want ErrNotObtained", err)
			}
			if err := lock.Refresh(ctx, 20*time.Second); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			for i, node := range cl.clients {
				eventually(t, fmt.Sprintf("node %d has the refreshed TTL", i), func() bool {
					return node.PTTL(ctx, "{redlock:order:42}").Val() > 10*time.Second
				})
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if !lock.ValidUntil().IsZero() {
				t.Errorf("ValidUntil after Release = %v, want the zero time", lock.ValidUntil())
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatalf("second Release: %v, want nil (idempotent)", err)
			}
			assertReleased(t, cl.clients, "order:42")
			if err := lock.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
				t.Errorf("Refresh after Release: %v, want ErrNotHeld", err)
			}
			lock2, err := c.TryObtain(ctx, "order:42", 10*time.Second)
			if err != nil {
				t.Fatalf("TryObtain after Release: %v", err)
			}
			_ = lock2.Release(ctx)
		})
	}
}

func TestValuesAreRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		v := newValue()
		if len(v) != 32 || seen[v] {
			t.Fatalf("value %q: length %d, seen before %v", v, len(v), seen[v])
		}
		seen[v] = true
	}
}

func TestExpiryAndReleaseByNonOwner(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			// An explicit node timeout: the default for a 200 ms TTL
			// (10 ms) is too tight for a loaded machine under -race.
			c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond))
			ctx := context.Background()
			old, err := c.TryObtain(ctx, "expiry", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// Wait well past the TTL for the keys to expire.
			time.Sleep(600 * time.Millisecond)
			if err := old.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Refresh of an expired lock: %v, want ErrNotHeld", err)
			}
			cur, err := c.TryObtain(ctx, "expiry", time.Minute)
			if err != nil {
				t.Fatalf("TryObtain after expiry: %v", err)
			}
			// The old owner's release must not touch the new owner's keys.
			err = old.Release(ctx)
			if !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Release by the old owner: %v, want ErrNotHeld", err)
			}
			var qe *QuorumError
			if !errors.As(err, &qe) || qe.Op != "release" || qe.Agreed != 0 || !errors.Is(err, ErrNotOwner) {
				t.Fatalf("Release error %#v, want a release *QuorumError with 0 agreed, nodes saying ErrNotOwner", err)
			}
			if _, err := c.TryObtain(ctx, "expiry", time.Minute); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("the new owner lost the lock to an old owner's release: %v", err)
			}
			if err := cur.Release(ctx); err != nil {
				t.Fatalf("Release by the owner: %v", err)
			}
		})
	}
}

func TestMinorityKilledStillObtains(t *testing.T) {
	cl := startNodes(t, 5)
	c := newClient(t, cl.clients)
	if err := cl.servers[3].Kill(); err != nil {
		t.Fatal(err)
	}
	lock, err := c.TryObtain(context.Background(), "minority", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain with one node down: %v", err)
	}
	if err := lock.Release(context.Background()); err != nil {
		t.Fatalf("Release with one node down: %v", err)
	}
}

func TestMajorityKilledFails(t *testing.T) {
	cl := startNodes(t, 5)
	c := newClient(t, cl.clients)
	killed := []int{0, 2, 4}
	for _, i := range killed {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.TryObtain(context.Background(), "majority", 10*time.Second)
	if !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryObtain with three of five down: %v, want ErrNotObtained", err)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("error %v is not a *QuorumError", err)
	}
	if qe.Need != 3 || qe.Agreed != 2 {
		t.Errorf("need %d agreed %d, want 3 and 2", qe.Need, qe.Agreed)
	}
	var named []int
	for _, ne := range qe.Nodes {
		named = append(named, ne.Node)
		if ne.Err == nil || ne.Addr != cl.servers[ne.Node].Addr() {
			t.Errorf("node error %v: want a reason and the address %s", ne, cl.servers[ne.Node].Addr())
		}
	}
	if !slices.Equal(named, killed) {
		t.Errorf("QuorumError names nodes %v, want %v (%v)", named, killed, err)
	}
	// The two nodes that said yes must have been released.
	for _, i := range []int{1, 3} {
		if _, ok := rawGet(t, cl.clients[i], "majority"); ok {
			t.Errorf("node %d kept the key of a failed attempt", i)
		}
	}
}

func TestFrozenNodeDoesNotDelay(t *testing.T) {
	cl := startNodes(t, 5)
	// A per-node timeout far above a healthy round trip: if an acquire
	// waited for the frozen node, it would take at least this long.
	const nodeTimeout = 5 * time.Second
	c := newClient(t, cl.clients, WithNodeTimeout(nodeTimeout))
	cl.pause(t, 1)
	for i := range 5 {
		start := time.Now()
		lock, err := c.TryObtain(context.Background(), fmt.Sprintf("frozen-%d", i), time.Minute)
		if err != nil {
			t.Fatalf("TryObtain with one frozen node: %v", err)
		}
		if took := time.Since(start); took >= nodeTimeout {
			t.Fatalf("TryObtain took %v: it waited for the frozen node", took)
		}
		_ = lock
	}
}

func TestFrozenSingleNodeTimesOutThenIsSkipped(t *testing.T) {
	cl := startNodes(t, 1)
	const nodeTimeout = 100 * time.Millisecond
	c := newClient(t, cl.clients, WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	cl.pause(t, 0)
	_, err := c.TryObtain(ctx, "frozen", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("attempt on a frozen node: %v, want ErrNotObtained and ErrNodeTimeout", err)
	}
	// Each failed attempt also sends a clean-up release, which times out
	// too; after three timeouts in a row the node is skipped.
	skipped := false
	for range 3 {
		_, err = c.TryObtain(ctx, "frozen", time.Minute)
		if errors.Is(err, ErrNodeSkipped) {
			skipped = true
			break
		}
		time.Sleep(2 * nodeTimeout) // let the clean-up time out as well
	}
	if !skipped {
		t.Fatalf("after repeated timeouts: %v, want ErrNodeSkipped", err)
	}
	if err := cl.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	// After the cooldown one probe goes through and the node is back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lock, err := c.TryObtain(ctx, "frozen-after", time.Minute)
		if err == nil {
			_ = lock.Release(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not used again after it resumed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestScriptFlushRecovery(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "flush", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.clients {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh after SCRIPT FLUSH: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
	for _, n := range cl.clients {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lock, err = c.TryObtain(ctx, "flush", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain after SCRIPT FLUSH: %v", err)
	}
	_ = lock.Release(ctx)
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
		if _, err := script.Release(ctx, goredis.New(late), warm.Lock, "x", false, false); err != nil {
			t.Fatal(err)
		}
	}
	// The late yes's key is deleted by a request sent after it: the
	// release, when it was still waiting for the acquire's answer, or
	// the answer's own clean-up (release.lua without publishing).
	var releases, resumedAt atomic.Int64
	late.AddHook(onEval(func(cmd redis.Cmder, err error) {
		if args := cmd.Args(); err == nil && len(args) == 6 && fmt.Sprint(args[3]) == "{redlock:late-release}" && resumedAt.Load() != 0 {
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
		switch args := cmd.Args(); {
		case err != nil:
		case len(args) > 6 && !acquired.Load():
			// The acquire ran on the node; its answer comes late.
			time.Sleep(300 * time.Millisecond)
			acquired.Store(true)
		case len(args) != 6 || fmt.Sprint(args[3]) != "{redlock:late-answer}":
			// Not a release of the lock (a fencing round's raise).
		case fmt.Sprint(args[5]) == "":
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
			if n, err := a.Int64(); err == nil && n&1 == 1 && len(a.Args()) > 3 &&
				fmt.Sprint(a.Args()[len(a.Args())-1]) == "" { // a clean-up: no publishing
				cleaned.Add(1) // deleted + 2 x receivers from release.lua: deleted
			}
		}
	}))
	nodes := slices.Clone(cl.clients)
	nodes[4] = late
	c := newClient(t, nodes, WithNodeTimeout(300*time.Millisecond))
	// The Client's first contact (each node's run_id, identity.go) before
	// node 4 freezes: its INFO would hold node 4's one connection, and the
	// acquire would never be written there.
	warmed, err := c.TryObtain(ctx, "first-contact", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := warmed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Another owner holds the key on nodes 0 and 1: with node 4 frozen the
	// outcome is open until node 4's timeout, and then fails.
	for _, i := range []int{0, 1} {
		if err := cl.clients[i].Set(ctx, "{redlock:late}", "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
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
	eventually(t, "the clean-up deletes the late yes on node 4", func() bool { return cleaned.Load() == 1 })
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
}

// fakeClock is a clock for the validity arithmetic: it returns first each
// of next in turn, then t, which set changes.
type fakeClock struct {
	mu   sync.Mutex
	next []time.Time
	t    time.Time
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) > 0 {
		t := f.next[0]
		f.next = f.next[1:]
		return t
	}
	return f.t
}

func (f *fakeClock) set(t time.Time) {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestValidityArithmetic(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	t0 := time.Now()
	const ttl = 10 * time.Second
	tests := []struct {
		name    string
		elapsed time.Duration
		drift   float64
		ok      bool
		want    time.Time // ValidUntil
	}{
		// validity = TTL − elapsed − (TTL × drift + 2 ms), so ValidUntil =
		// start + TTL − TTL × drift − 2 ms whatever the elapsed time.
		{"fast", time.Millisecond, 0.01, true, t0.Add(ttl - 100*time.Millisecond - 2*time.Millisecond)},
		{"slow", 9 * time.Second, 0.01, true, t0.Add(ttl - 100*time.Millisecond - 2*time.Millisecond)},
		{"no drift", time.Second, 0, true, t0.Add(ttl - 2*time.Millisecond)},
		{"large drift", time.Second, 0.2, true, t0.Add(ttl - 2*time.Second - 2*time.Millisecond)},
		{"just expired", ttl - 102*time.Millisecond, 0.01, false, time.Time{}},
		{"expired", ttl, 0.01, false, time.Time{}},
		{"drift eats it", 5100 * time.Millisecond, 0.49, false, time.Time{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The clock reads t0 until the acquire script runs on a node,
			// and t0+elapsed from then on: the round took elapsed.
			clock := &fakeClock{t: t0}
			var nodes []redis.UniversalClient
			for _, s := range cl.servers {
				n := s.Client()
				t.Cleanup(func() { _ = n.Close() })
				n.AddHook(onEval(func(redis.Cmder, error) { clock.set(t0.Add(tt.elapsed)) }))
				nodes = append(nodes, n)
			}
			c := newClient(t, nodes, WithDriftFactor(tt.drift), WithClock(clock.now))
			name := fmt.Sprintf("validity-%d", i)
			lock, err := c.TryObtain(ctx, name, ttl)
			if !tt.ok {
				var qe *QuorumError
				if !errors.As(err, &qe) || !qe.Expired || !errors.Is(err, ErrNotObtained) {
					t.Fatalf("TryObtain: %v, want an expired *QuorumError", err)
				}
				// The keys of an attempt that ran out of validity are
				// released (a late node's in the background).
				for j, node := range cl.clients {
					eventually(t, fmt.Sprintf("node %d drops the key of an expired attempt", j), func() bool {
						_, ok := rawGet(t, node, name)
						return !ok
					})
				}
				return
			}
			if err != nil {
				t.Fatalf("TryObtain: %v", err)
			}
			if got := lock.ValidUntil(); !got.Equal(tt.want) {
				t.Errorf("ValidUntil = start + %v, want start + %v", got.Sub(t0), tt.want.Sub(t0))
			}
			_ = lock.Release(ctx)
		})
	}
}

func TestRefreshOnlyWithinValidity(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	t0 := time.Now()
	const ttl = 10 * time.Second
	// Acquire at t0; the refresh starts after the validity has ended.
	clock := &fakeClock{t: t0}
	c := newClient(t, cl.clients, WithClock(clock.now))
	lock, err := c.TryObtain(ctx, "refresh-late", ttl)
	if err != nil {
		t.Fatal(err)
	}
	clock.set(t0.Add(ttl))
	if err := lock.Refresh(ctx, ttl); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after validity: %v, want ErrNotHeld", err)
	}
	_ = lock.Release(ctx)
}

// A refresh that does not win may still have run on some nodes, and a
// shorter TTL there shortens their keys: the lock's validity must not
// outlast that.
func TestFailedShorterRefreshLowersValidity(t *testing.T) {
	t.Run("past the new validity: lost", func(t *testing.T) {
		cl := startNodes(t, 3)
		ctx := context.Background()
		t0 := time.Now()
		clock := &fakeClock{t: t0}
		// A per-node timeout below the 100 ms refresh's validity (a longer
		// one is refused with ErrInvalid), but not so short that a loaded
		// machine misses it.
		c := newClient(t, cl.clients, WithClock(clock.now), WithNodeTimeout(60*time.Millisecond))
		var lock *Lock
		var err error
		for range 20 { // a loaded machine may still miss it: retry, after the clean-up
			if lock, err = c.TryObtain(ctx, "short", 30*time.Second); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The refresh starts at t0 and every node applies it, but the
		// quorum is seen only at t0+1s, past its 100 ms TTL.
		clock.mu.Lock()
		clock.next, clock.t = []time.Time{t0}, t0.Add(time.Second)
		clock.mu.Unlock()
		err = lock.Refresh(ctx, 100*time.Millisecond)
		if !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Refresh: %v, want ErrNotHeld: the keys now expire within 100 ms", err)
		}
		if !lock.ValidUntil().IsZero() {
			t.Fatalf("ValidUntil = t0%+v, want the zero time of a lost lock", lock.ValidUntil().Sub(t0))
		}
	})
	t.Run("nodes silent: lowered", func(t *testing.T) {
		cl := startNodes(t, 3)
		ctx := context.Background()
		c := newClient(t, cl.clients, WithNodeTimeout(200*time.Millisecond))
		lock, err := c.TryObtain(ctx, "short", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cl.pause(t, 1, 2)
		before := time.Now()
		// Refresh retries until its context ends.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = lock.Refresh(rctx, 5*time.Second)
		// Its last round finds the frozen nodes timed out, or skipped
		// after three timeouts in a row.
		if err == nil || errors.Is(err, ErrNotHeld) || !(errors.Is(err, ErrNodeTimeout) || errors.Is(err, ErrNodeSkipped)) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh with two of three frozen: %v, want a *QuorumError of timeouts and the context's end", err)
		}
		// Node 0 now expires the key 5 s after the refresh was sent.
		if left := lock.ValidUntil().Sub(before); left > 5*time.Second || left <= 0 {
			t.Fatalf("ValidUntil = refresh + %v, want at most 5s", left)
		}
	})
}

func TestRefreshReseedsANodeThatLostTheKey(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "reseed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rawGet(t, cl.clients[0], "reseed")
	if err := cl.clients[2].Del(ctx, "{redlock:reseed}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := lock.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	eventually(t, "node 2 is re-seeded with the lock's value", func() bool {
		got, ok := rawGet(t, cl.clients[2], "reseed")
		return ok && got == want
	})
	// A node where another owner holds the key is not overwritten, and a
	// quorum of such nodes means the lock is lost.
	for _, i := range []int{0, 1} {
		if err := cl.clients[i].Set(ctx, "{redlock:reseed}", "thief", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = lock.Refresh(ctx, time.Minute)
	if !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrHeld) {
		t.Fatalf("Refresh with the key taken on a quorum: %v, want ErrNotHeld", err)
	}
	if got, _ := rawGet(t, cl.clients[0], "reseed"); got != "thief" {
		t.Fatalf("refresh overwrote another owner's key: %q", got)
	}
	if err := lock.Refresh(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh of a lost lock: %v, want ErrNotHeld", err)
	}
}

func TestObtainWaitsForRelease(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	holder, err := c.TryObtain(ctx, "wait", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = holder.Release(ctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	lock, err := c.Obtain(wctx, "wait", time.Minute)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	_ = lock.Release(ctx)
}

func TestObtainNeverSleepsPastHolderTTL(t *testing.T) {
	cl := startNodes(t, 1)
	// Retry delays far longer than the holder's TTL: only the PTTL cap lets
	// the waiter in before its context ends.
	c := newClient(t, cl.clients, WithRetryDelay(30*time.Second, time.Minute))
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "pttl", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	lock, err := c.Obtain(wctx, "pttl", time.Minute)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	_ = lock.Release(ctx)
}

func TestObtainContextEnds(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "ctx", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Long enough for the first attempt to be answered on a loaded
	// machine: the error must carry its refusals.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Obtain(wctx, "ctx", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain past its deadline: %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, ErrHeld) {
		t.Fatalf("Obtain past its deadline: %v, want the last attempt's *QuorumError", err)
	}

	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	_, err = c.TryObtain(cctx, "ctx-cancelled", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryObtain with a cancelled context: %v, want ErrNotObtained and Canceled", err)
	}

	// A cause is joined too, without hiding context.Canceled.
	why := errors.New("shutting down")
	kctx, cancel3 := context.WithCancelCause(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel3(why) }()
	_, err = c.Obtain(kctx, "ctx", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
		t.Fatalf("Obtain cancelled with a cause: %v, want ErrNotObtained, Canceled and the cause", err)
	}
}

func TestMaxAttempts(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "attempts", time.Minute); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	cl.clients[0].AddHook(countEval{&calls})
	_, err := c.Obtain(ctx, "attempts", time.Minute, WithMaxAttempts(3), WithRetryDelay(time.Millisecond, 2*time.Millisecond))
	if !errors.Is(err, ErrNotObtained) {
		t.Fatalf("Obtain: %v, want ErrNotObtained", err)
	}
	if got := calls.Load(); got != 3 {
		t.Fatalf("%d acquire scripts ran, want 3", got)
	}
}

// WithMaxAttempts counts the attempts that follow a wait of the retry
// delay, with notifications and with polling: two attempts of a lock that
// another client holds for 50 ms get it; two of a lock held for a minute
// fail after exactly two acquire rounds, the second after the delay.
func TestMaxAttemptsAreSpacedByTheRetryDelay(t *testing.T) {
	for _, notified := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notified), func(t *testing.T) {
			cl := startNodes(t, 1)
			rec := &eventRecorder{}
			opts := []Option{WithHook(rec)}
			if !notified {
				opts = append(opts, withoutNotify())
			}
			holders, c := newClient(t, cl.clients), newClient(t, cl.clients, opts...)
			ctx := context.Background()
			const delay = 150 * time.Millisecond
			retry := []ObtainOption{WithMaxAttempts(2), WithRetryDelay(delay, delay)}

			short, err := holders.TryObtain(ctx, "short-hold", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = short.Release(ctx)
			}()
			l, err := c.Obtain(ctx, "short-hold", time.Minute, retry...)
			if err != nil {
				t.Fatalf("Obtain with two attempts %v apart of a lock held for 50 ms: %v", delay, err)
			}
			_ = l.Release(ctx)

			if _, err := holders.TryObtain(ctx, "long-hold", time.Minute); err != nil {
				t.Fatal(err)
			}
			var scripts atomic.Int32
			cl.clients[0].AddHook(countEval{&scripts})
			start := time.Now()
			_, err = c.Obtain(ctx, "long-hold", time.Minute, retry...)
			elapsed := time.Since(start)
			if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrHeld) {
				t.Fatalf("Obtain of a lock held for a minute: %v, want ErrNotObtained and ErrHeld", err)
			}
			if got := scripts.Load(); got != 2 {
				t.Errorf("%d acquire scripts ran, want 2", got)
			}
			if elapsed < delay {
				t.Errorf("Obtain gave up after %v, before the retry delay %v", elapsed, delay)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			ob := rec.obtains[len(rec.obtains)-1]
			attempts := 0
			for _, a := range rec.attempts {
				if a.ObtainID == ob.ObtainID {
					attempts++
				}
			}
			var waits []WaitEvent
			for _, w := range rec.waits {
				if w.ObtainID == ob.ObtainID {
					waits = append(waits, w)
				}
			}
			if ob.Attempts != 2 || attempts != 2 {
				t.Errorf("ObtainEvent.Attempts %d and %d AttemptEvents, want 2 and 2", ob.Attempts, attempts)
			}
			if len(waits) != 1 || waits[0].WokenBy != "timer" || waits[0].Waited < delay {
				t.Errorf("waits %+v, want one of the retry delay %v, ended by its timer", waits, delay)
			}
		})
	}
}

// countEval counts EVALSHA and EVAL commands sent through a client.
type countEval struct{ n *atomic.Int32 }

func (countEval) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (countEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A nil *Lock, what a failed Obtain returns, is safe to use: "defer
// lock.Release(ctx)" before checking the error must not panic.
func TestNilLock(t *testing.T) {
	var l *Lock
	ctx := context.Background()
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release: %v, want ErrNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Refresh: %v, want ErrNotHeld", err)
	}
	if err := l.Err(); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Err: %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done is not closed")
	}
	if k, tok, v, ttl := l.Name(), l.Token(), l.ValidUntil(), l.TTL(); k != "" || tok != 0 || !v.IsZero() || ttl != 0 {
		t.Errorf("Key %q, Token %d, ValidUntil %v, TTL %v: want zero values", k, tok, v, ttl)
	}
}

func TestReleaseWithCancelledContext(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	lock, err := c.TryObtain(context.Background(), "cancelled", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release with a cancelled context: %v", err)
	}
	assertReleased(t, cl.clients, "cancelled")
}

// assertReleased checks, right after a Release returned, that a quorum of
// nodes no longer holds the lock, and that the others drop it soon: Release
// returns once a quorum deleted the key.
func assertReleased(t *testing.T, nodes []redis.UniversalClient, name string) {
	t.Helper()
	still := 0
	for _, node := range nodes {
		if _, ok := rawGet(t, node, name); ok {
			still++
		}
	}
	if quorum := len(nodes)/2 + 1; len(nodes)-still < quorum {
		t.Errorf("%d of %d nodes still hold the key when Release returns, want at most %d", still, len(nodes), len(nodes)-quorum)
	}
	for i, node := range nodes {
		eventually(t, fmt.Sprintf("node %d drops the released key", i), func() bool {
			_, ok := rawGet(t, node, name)
			return !ok
		})
	}
}

func TestCloseReleasesHeldLocks(t *testing.T) {
	cl := startNodes(t, 3)
	c, err := New(cl.clients, WithRestartGuard(GuardOff)) // fresh servers
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "close", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, node := range cl.clients {
		if _, ok := rawGet(t, node, "close"); ok {
			t.Errorf("node %d still has the key after Close", i)
		}
	}
	if _, err := c.TryObtain(ctx, "close", time.Minute); !errors.Is(err, ErrClosed) {
		t.Errorf("TryObtain after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Obtain(ctx, "close", time.Minute); !errors.Is(err, ErrClosed) {
		t.Errorf("Obtain after Close: %v, want ErrClosed", err)
	}
	if err := lock.Refresh(ctx, time.Minute); !errors.Is(err, ErrClosed) {
		t.Errorf("Refresh after Close: %v, want ErrClosed", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Errorf("Release after Close: %v, want nil (released by Close)", err)
	}
}

func TestCloseWhileObtaining(t *testing.T) {
	cl := startNodes(t, 5)
	c, err := New(cl.clients, WithRestartGuard(GuardOff)) // fresh servers
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for j := 0; ; j++ {
				l, err := c.TryObtain(context.Background(), fmt.Sprintf("close-%d-%d", i, j), time.Minute)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err == nil && j%2 == 0 {
					_ = l.Release(context.Background())
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Every lock obtained before Close was released by it or its owner.
	for i, node := range cl.clients {
		keys, err := node.Keys(context.Background(), "{redlock:close-*}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("node %d: %d keys left after Close, e.g. %s", i, len(keys), keys[0])
		}
	}
}

func TestBadInput(t *testing.T) {
	cl := startNodes(t, 2)
	a, b := cl.clients[0], cl.clients[1]
	sameAddr := redis.NewClient(&redis.Options{Addr: cl.servers[0].Addr()})
	t.Cleanup(func() { _ = sameAddr.Close() })

	newTests := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []Option
	}{
		{"no nodes", nil, nil},
		{"nil node", []redis.UniversalClient{a, nil}, nil},
		{"same client twice", []redis.UniversalClient{a, b, a}, nil},
		{"same address twice", []redis.UniversalClient{a, sameAddr}, nil},
		{"negative drift", []redis.UniversalClient{a}, []Option{WithDriftFactor(-0.1)}},
		{"drift 0.5", []redis.UniversalClient{a}, []Option{WithDriftFactor(0.5)}},
		{"negative node timeout", []redis.UniversalClient{a}, []Option{WithNodeTimeout(-time.Second)}},
		{"zero retry delay", []redis.UniversalClient{a}, []Option{WithRetryDelay(0, time.Second)}},
		{"max below min delay", []redis.UniversalClient{a}, []Option{WithRetryDelay(time.Second, time.Millisecond)}},
		{"negative attempts", []redis.UniversalClient{a}, []Option{WithMaxAttempts(-1)}},
		{"nil option", []redis.UniversalClient{a}, []Option{nil}},
		{"more than limits.MaxNodes", tooMany(t), nil},
	}
	for _, tt := range newTests {
		t.Run("New/"+tt.name, func(t *testing.T) {
			c, err := New(tt.nodes, tt.opts...)
			if !errors.Is(err, ErrInvalid) || c != nil {
				t.Fatalf("New: %v, %v; want nil and ErrInvalid", c, err)
			}
		})
	}

	// NewFromNodes: the nodes of any driver.
	na, nb := goredis.New(a), goredis.New(b)
	var nilNode *goredis.Node
	fromNodesTests := []struct {
		name  string
		nodes []driver.Node
	}{
		{"no nodes", nil},
		{"nil node", []driver.Node{na, nil}},
		{"nil pointer", []driver.Node{na, nilNode}},
		{"same node twice", []driver.Node{na, nb, na}},
		{"same address twice", []driver.Node{na, goredis.New(sameAddr)}},
		{"one client in two nodes", []driver.Node{na, goredis.New(a)}},
	}
	for _, tt := range fromNodesTests {
		t.Run("NewFromNodes/"+tt.name, func(t *testing.T) {
			c, err := NewFromNodes(tt.nodes)
			if !errors.Is(err, ErrInvalid) || c != nil {
				t.Fatalf("NewFromNodes: %v, %v; want nil and ErrInvalid", c, err)
			}
		})
	}

	c := newClient(t, []redis.UniversalClient{a, b})
	obtainTests := []struct {
		name string
		key  string
		ttl  time.Duration
		opts []ObtainOption
	}{
		{"empty key", "", time.Second, nil},
		{"zero TTL", "k", 0, nil},
		{"negative TTL", "k", -time.Second, nil},
		{"TTL below minimum", "k", limits.MinTTL - time.Millisecond, nil},
		{"bad retry option", "k", time.Second, []ObtainOption{WithRetryDelay(-1, 0)}},
		{"nil option", "k", time.Second, []ObtainOption{nil}},
	}
	for _, tt := range obtainTests {
		t.Run("Obtain/"+tt.name, func(t *testing.T) {
			for _, obtain := range []func(context.Context, string, time.Duration, ...ObtainOption) (*Lock, error){c.TryObtain, c.Obtain} {
				l, err := obtain(context.Background(), tt.key, tt.ttl, tt.opts...)
				if !errors.Is(err, ErrInvalid) || l != nil {
					t.Fatalf("obtain: %v, %v; want nil and ErrInvalid", l, err)
				}
			}
		})
	}
	t.Run("Refresh/bad TTL", func(t *testing.T) {
		l, err := c.TryObtain(context.Background(), "refresh-ttl", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Refresh(context.Background(), 0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Refresh(0): %v, want ErrInvalid", err)
		}
		_ = l.Release(context.Background())
	})
	// A per-node timeout at or above the validity puts the loss deadline
	// before the lock is even obtained.
	slow := newClient(t, []redis.UniversalClient{a, b}, WithNodeTimeout(time.Second))
	t.Run("Obtain/node timeout above validity", func(t *testing.T) {
		for _, ttl := range []time.Duration{time.Second, 500 * time.Millisecond} {
			if l, err := slow.TryObtain(context.Background(), "slow", ttl); !errors.Is(err, ErrInvalid) || l != nil {
				t.Fatalf("TTL %v: %v, %v; want nil and ErrInvalid", ttl, l, err)
			}
		}
		if err := slow.Do(context.Background(), "slow", time.Second, func(context.Context) error { return nil }); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Do: %v, want ErrInvalid", err)
		}
	})
	t.Run("Refresh/node timeout above validity", func(t *testing.T) {
		l, err := slow.TryObtain(context.Background(), "slow-refresh", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		if err := l.Refresh(context.Background(), time.Second); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Refresh(1s): %v, want ErrInvalid", err)
		}
	})
}

// tooMany is limits.MaxNodes+1 distinct clients (New does no I/O with them).
func tooMany(t *testing.T) []redis.UniversalClient {
	nodes := make([]redis.UniversalClient, limits.MaxNodes+1)
	for i := range nodes {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
		t.Cleanup(func() { _ = c.Close() })
		nodes[i] = c
	}
	return nodes
}

func TestNodeErrorsAreReportedPerNode(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	// Node 0: the key holds a list, not a lock.
	if err := cl.clients[0].RPush(ctx, "{redlock:typed}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	// Node 1: an ACL user that may not touch lock keys.
	if err := cl.clients[1].Do(ctx, "ACL", "SETUSER", "app", "on", ">secret", "~other:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: cl.servers[1].Addr(), Username: "app", Password: "secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = limited.Close() })
	// Node 2: nothing listens any more.
	if err := cl.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	// One node per client, so that each answer is awaited (a round with
	// more nodes may be decided before the last one answers).
	for i, tt := range []struct {
		node redis.UniversalClient
		want string // prefix of the Redis error reply; "" for a connection error
	}{{cl.clients[0], "WRONGTYPE"}, {limited, "NOPERM"}, {cl.clients[2], ""}} {
		c := newClient(t, []redis.UniversalClient{tt.node})
		_, err := c.TryObtain(ctx, "typed", time.Minute)
		var qe *QuorumError
		if !errors.As(err, &qe) || len(qe.Nodes) != 1 || !errors.Is(err, ErrNotObtained) {
			t.Fatalf("case %d: TryObtain: %v, want a *QuorumError naming the node", i, err)
		}
		var rerr redis.Error
		isReply := errors.As(qe.Nodes[0].Err, &rerr)
		switch {
		case tt.want != "" && (!isReply || !hasPrefix(rerr.Error(), tt.want)):
			t.Errorf("case %d: %v, want a %s error from Redis", i, qe.Nodes[0].Err, tt.want)
		case tt.want == "" && (isReply || qe.Nodes[0].Err == nil):
			t.Errorf("case %d: %v, want a connection error", i, qe.Nodes[0].Err)
		}
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func TestRedisCluster(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	c := newClient(t, []redis.UniversalClient{node})
	ctx := context.Background()
	for i := range 20 {
		name := fmt.Sprintf("cluster-%d", i)
		lock, err := c.TryObtain(ctx, name, time.Minute)
		if err != nil {
			t.Fatalf("TryObtain on a cluster: %v", err)
		}
		if _, err := c.TryObtain(ctx, name, time.Minute); !errors.Is(err, ErrHeld) {
			t.Fatalf("second TryObtain on a cluster: %v, want ErrHeld", err)
		}
		if err := lock.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh on a cluster: %v", err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("Release on a cluster: %v", err)
		}
	}
}

func TestKeyHashTag(t *testing.T) {
	c := &engine{cfg: defaultConfig()}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"order:42", "{redlock:order:42}", true},
		{"{tenant}:x", "{redlock:{tenant}:x}", true},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := c.redisKey(tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("redisKey(%q) = %q, %v; want %q ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
	}
	c.cfg.prefix = ""
	if _, err := c.redisKey("}x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty hash tag accepted: %v", err)
	}
}

func TestBackoffBounds(t *testing.T) {
	b := newBackoff(retryConfig{minDelay: 10 * time.Millisecond, maxDelay: 100 * time.Millisecond})
	for n := range 50 {
		d, ok := b.next()
		if !ok {
			t.Fatalf("wait %d: the retries ended", n)
		}
		hi := 100 * time.Millisecond
		if n < 3 {
			hi = 10 * time.Millisecond << (n + 1)
		}
		if d < 10*time.Millisecond || d > hi {
			t.Fatalf("wait %d = %v, want in [10ms, %v]", n, d, hi)
		}
	}
}

func TestNodeTimeoutDefault(t *testing.T) {
	cfg := defaultConfig()
	tests := []struct{ ttl, want time.Duration }{
		{10 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second},
		{time.Second, 50 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{20 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := cfg.nodeTimeoutFor(tt.ttl); got != tt.want {
			t.Errorf("nodeTimeoutFor(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}

// onEval calls f with every EVALSHA or EVAL a client has processed, and
// the error it ended with (NOSCRIPT, for an EVALSHA that EVAL follows).
type onEval func(redis.Cmder, error)

func (onEval) DialHook(next redis.DialHook) redis.DialHook { return next }

// configRecord reports whether cmd runs record.lua, the configuration
// record a Client writes before its first obtain (joint.go): the hooks of
// these tests are about the scripts of locks.
func configRecord(cmd redis.Cmder) bool {
	args := cmd.Args()
	k, _ := args[min(3, len(args)-1)].(string)
	return strings.HasSuffix(k, "}:configs")
}
func (f onEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && !configRecord(cmd) {
			f(cmd, err)
		}
		return err
	}
}
func (onEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestReleaseTimeoutIsNotErrNotHeld(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients, WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "release-timeout", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Node 0 lost the key; node 1 does not answer: no quorum confirms the
	// release, but neither did a quorum say the lock was not ours.
	if err := cl.clients[0].Del(ctx, "{redlock:release-timeout}").Err(); err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1)
	err = lock.Release(ctx)
	var qe *QuorumError
	if !errors.As(err, &qe) || errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrNotOwner) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("Release: %v; want a *QuorumError with ErrNotOwner and ErrNodeTimeout per node, not ErrNotHeld", err)
	}
}

// TryObtain makes one attempt, whatever WithMaxAttempts says, on every
// handle: the Client's shorthand, a semaphore, a reentrant lock, a writer,
// and one pass of All and Any.
func TestTryObtainIsOneAttempt(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	a := newClient(t, cl.clients)
	b := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	l, err := a.TryObtain(ctx, "one", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	p, err := a.Semaphore("sem", 1).TryObtain(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	f, err := a.Reentrant("fam", "job-a").TryObtain(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	_, writer := b.RWMutex("fam")
	tries := []struct {
		name string
		h    Locker
	}{
		{"the Client's TryObtain", nil},
		{"a semaphore", b.Semaphore("sem", 1)},
		{"a reentrant lock", b.Reentrant("fam", "job-b")},
		{"a writer", writer},
		{"All", b.All("one")},
		{"Any", b.Any("one")},
	}
	for _, tc := range tries {
		var err error
		if tc.h == nil {
			_, err = b.TryObtain(ctx, "one", 10*time.Second, WithMaxAttempts(3))
		} else {
			_, err = tc.h.TryObtain(ctx, 10*time.Second, WithMaxAttempts(3))
		}
		if !errors.Is(err, ErrHeld) {
			t.Fatalf("TryObtain of %s, held: %v, want ErrHeld", tc.name, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) != len(tries) {
		t.Fatalf("%d attempts for %d TryObtains with WithMaxAttempts(3), want %d", len(rec.attempts), len(tries), len(tries))
	}
}

// A manual Refresh retries a round that failed for want of answers, within
// its context: a node frozen for a while does not fail a refresh that a
// later round can confirm.
func TestRefreshRetriesWithinItsContext(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond), WithRetryDelay(50*time.Millisecond, 100*time.Millisecond))
	// Obtain, not TryObtain: a first round on fresh connections may not
	// answer within 100 ms on a loaded machine.
	octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
	defer ocancel()
	lock, err := c.Obtain(octx, "retried", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1, 2)
	rec := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		rec <- lock.Refresh(rctx, time.Minute)
	}()
	time.Sleep(500 * time.Millisecond) // several rounds fail meanwhile
	for _, i := range []int{1, 2} {
		if err := cl.servers[i].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-rec; err != nil {
		t.Fatalf("Refresh across a pause of two of three nodes: %v, want a later round to confirm it", err)
	}
}

// A Client's WithBackoff spaces the rounds of a manual Refresh too, and a
// negative wait ends the Refresh with its last round's error, well before
// its context ends.
func TestRefreshFollowsTheClientsBackoff(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	var (
		mu    sync.Mutex
		asked []int
	)
	c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond), WithBackoff(func(n int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, n)
		if n == 2 {
			return -1 // three rounds
		}
		return 50 * time.Millisecond
	}))
	// Obtain, not TryObtain: a first round on fresh connections may not
	// answer within 100 ms on a loaded machine.
	octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
	defer ocancel()
	lock, err := c.Obtain(octx, "refresh-strategy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1, 2)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = lock.Refresh(rctx, time.Minute)
	if err == nil || rctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh on one of three nodes: %v, want the last round's error, before the context ends", err)
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("the strategy was asked for waits %v, want [0 1 2]", got)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("three rounds took %v, less than the strategy's two waits of 50 ms", d)
	}
}

// WithBackoff replaces the retry delay with the caller's strategy: its
// waits space the attempts, and a negative one ends the obtain.
func TestWithBackoff(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	holder := newClient(t, cl.clients)
	c := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	if _, err := New(cl.clients, WithBackoff(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New with a nil backoff: %v, want ErrInvalid", err)
	}
	if _, err := c.Obtain(ctx, "x", time.Minute, WithBackoff(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Obtain with a nil backoff: %v, want ErrInvalid", err)
	}
	l, err := holder.TryObtain(ctx, "strategy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var asked []int
	linear := WithBackoff(func(n int) time.Duration {
		asked = append(asked, n)
		if n == 2 {
			return -1 // stop after three attempts
		}
		return time.Duration(n+1) * 20 * time.Millisecond
	})
	start := time.Now()
	_, err = c.Obtain(ctx, "strategy", time.Minute, linear)
	if !errors.Is(err, ErrHeld) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain ended by its backoff: %v, want the last attempt's ErrHeld", err)
	}
	if !slices.Equal(asked, []int{0, 1, 2}) {
		t.Fatalf("the strategy was asked for waits %v, want [0 1 2]", asked)
	}
	if n := rec.attemptCount(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("three attempts took %v, less than the strategy's waits (20 ms + 40 ms)", d)
	}
}

// A node whose port is closed is reported as refusing connections, not as
// a timeout, from the first attempt on, on go-redis's default options
// (whose dial retries would outlast the node timeout); the driver's
// TestRefusingNodeIsGated checks what go-redis logs.
func TestRefusedConnectionIsReportedAsRefused(t *testing.T) {
	cl := startNodes(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	dead := redis.NewClient(&redis.Options{Addr: closed, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = dead.Close() })
	// A node timeout longer than go-redis's series of dials (5, 100 ms
	// apart); with a shorter one the first attempt reads as a timeout.
	c := newClient(t, []redis.UniversalClient{cl.clients[0], dead}, WithoutBreaker(), WithNodeTimeout(2*time.Second))
	ctx := context.Background()
	for i := range 5 {
		l, err := c.TryObtain(ctx, fmt.Sprintf("refused-%d", i), 10*time.Second)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatal("obtained with one of two nodes down")
		}
		var qe *QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("TryObtain %d: %v, want a *QuorumError", i, err)
		}
		for _, n := range qe.Nodes {
			if n.Node == 1 && (!errors.Is(n.Err, syscall.ECONNREFUSED) || !strings.Contains(n.Err.Error(), "connection refused") || n.Reason != "error") {
				t.Fatalf("TryObtain %d: the closed port's reason: %v (%s), want connection refused", i, n.Err, n.Reason)
			}
		}
	}
}
