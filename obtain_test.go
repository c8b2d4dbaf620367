package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// TestMajorityKilledFails: three of five nodes killed. The attempt fails
// with a QuorumError that names each killed node, its address and its
// reason. When the three failures are known decides the outcome, not the
// two live nodes' yes: a round decides as soon as a quorum is out of
// reach, so a live node whose reply had not come by then is named as
// pending (ErrNodePending), and one whose yes had come is counted in
// Agreed. Which comes first is the go-redis release's timing: on v9.23.0
// the killed nodes' requests time out (go-redis's series of dials is
// longer than the node timeout) and the live nodes agree first; on
// v9.16.0 the three refusals came a few milliseconds before the live
// nodes' replies (each in every run seen: five on v9.16.0, three on
// v9.23.0). Either way the live nodes' yes must be given back.
func TestMajorityKilledFails(t *testing.T) {
	cl := startNodes(t, 5)
	c := newClient(t, cl.clients)
	killed, live := []int{0, 2, 4}, []int{1, 3}
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
	var named, pending []int
	for _, ne := range qe.Nodes {
		named = append(named, ne.Node)
		if ne.Err == nil || ne.Addr != cl.servers[ne.Node].Addr() {
			t.Errorf("node error %v: want a reason and the address %s", ne, cl.servers[ne.Node].Addr())
		}
		switch {
		case slices.Contains(live, ne.Node) && errors.Is(ne.Err, ErrNodePending):
			pending = append(pending, ne.Node)
		case slices.Contains(live, ne.Node):
			t.Errorf("live node %d named with %v, want agreed or %v", ne.Node, ne.Err, ErrNodePending)
		case errors.Is(ne.Err, ErrNodePending):
			t.Errorf("killed node %d pending: the outcome was decided without its failure", ne.Node)
		}
	}
	t.Logf("live nodes pending when the outcome was decided: %v", pending)
	if want := killed; !slices.Equal(slices.DeleteFunc(slices.Clone(named), func(i int) bool { return slices.Contains(pending, i) }), want) {
		t.Errorf("QuorumError names nodes %v (of them pending %v), want %v and pending live nodes (%v)", named, pending, want, err)
	}
	if want := len(live) - len(pending); qe.Need != 3 || qe.Agreed != want {
		t.Errorf("need %d agreed %d, want 3 and %d (%d live nodes pending)", qe.Need, qe.Agreed, want, len(pending))
	}
	// The two live nodes said yes, or will: their keys must be given
	// back, a late yes's by the round's settle.
	for _, i := range live {
		eventually(t, fmt.Sprintf("node %d drops the key of the failed attempt", i), func() bool {
			_, ok := rawGet(t, cl.clients[i], "majority")
			return !ok
		})
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
