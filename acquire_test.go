package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Tests of the acquire round (acquire.go): one winner among many, a
// minority or majority of nodes down or frozen, each node's reason, and
// the second round's QuorumError; then the fencing tokens it issues
// (increasing across Clients and node restarts, the second round that
// makes the counters agree, and review finding 1's token inversion
// through it) and the restart guard's recovering nodes, through node
// restarts, failovers and rolling restarts.

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

// A QuorumError of the fencing second round names a reason for every node
// it lists, as Nodes promises ("the reason of every node that did not
// agree"): a node that raised its counter but had voted no in the first
// round does not count, and its reason is its first-round no.
//
// Three nodes (quorum 2). n1 and n2 vote yes with disagreeing tokens (n2's
// counter is far ahead), so the obtain needs a second round; n3 holds
// another owner's key and votes no. Just before the second round's raise
// reaches n2, n2 pauses its writes (CLIENT PAUSE WRITE) for longer than
// the node timeout, so that the raise times out there: only n1 confirms,
// and the obtain fails in its second round, listing n2 (timeout) and n3
// (held).
func TestSecondRoundQuorumErrorNamesReasons(t *testing.T) {
	const (
		name = "second-round-reasons"
		key  = "{redlock:" + name + "}"
	)
	cl := startNodes(t, 3)
	ctx := context.Background()
	for i, v := range []int{1, 1000, 1} {
		if err := cl.clients[i].HSet(ctx, key+":fence", "v", v, "e", "off").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.clients[2].Set(ctx, key, "another owner", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// n3's first-round no is most often heard before the round is
	// decided: n1's and n2's acquire replies wait until n3 has answered.
	n3Answered := newSignal()
	t.Cleanup(n3Answered.fire)
	var nodes []redis.UniversalClient
	for i, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		c.AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if !isAcquire(cmd) {
				return next(ctx, cmd)
			}
			err := next(ctx, cmd)
			if i == 2 {
				n3Answered.fire()
			} else {
				n3Answered.wait(t, "n3 answered the first round")
			}
			return err
		}))
		if i == 1 {
			c.AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isFence(cmd) {
					// n2 pauses its writes for longer than the node
					// timeout: the raise times out there.
					if err := cl.clients[1].Do(ctx, "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
						return err
					}
				}
				return next(ctx, cmd)
			}))
		}
		nodes = append(nodes, c)
	}
	c := newClient(t, nodes, WithNodeTimeout(time.Second))
	l, err := c.TryObtain(ctx, name, 10*time.Second)
	if err == nil {
		_ = l.Release(ctx)
		t.Fatal("obtained, want refused in the fencing second round")
	}
	var qe *QuorumError
	if !errors.As(err, &qe) || qe.Op != "obtain (fencing token)" || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryObtain: %v; want a QuorumError of the fencing second round", err)
	}
	t.Logf("%v", err)
	if qe.Agreed != 1 || len(qe.Nodes) != 2 {
		t.Fatalf("%d agreed, nodes %+v; want 1 agreed (n1) and n2, n3 listed", qe.Agreed, qe.Nodes)
	}
	for _, n := range qe.Nodes {
		if n.Err == nil || n.Reason == "" {
			t.Errorf("node %d (%s) listed with reason %v (%q)", n.Node, n.Addr, n.Err, n.Reason)
		}
	}
	// n3's first-round no: held, or, when the first round was decided on
	// n1's and n2's yes before n3's reply was counted, pending.
	if n := qe.Nodes[1]; n.Node != 2 || !(errors.Is(n.Err, ErrHeld) || errors.Is(n.Err, quorum.ErrPending)) || !strings.Contains(n.Err.Error(), "first round") {
		t.Errorf("n3: %+v; want its first-round reason, held by another owner (or pending)", n)
	}
	if n := qe.Nodes[0]; n.Node != 1 || !errors.Is(n.Err, ErrNodeTimeout) {
		t.Errorf("n2: %+v; want the raise's timeout", n)
	}
}

// One Client with a larger max TTL lengthens every node's recovery for the
// others (WithMaxTTL says so); their error names the real source of the
// window, the max TTL in the node's epoch record, not their own WithMaxTTL.
func TestMaxTTLOfAnotherClientIsNamedInTheRecoveringError(t *testing.T) {
	cl := startNodes(t, 1)
	ctx := context.Background()
	big := newClient(t, cl.clients, WithRestartGuard(GuardOn), WithMaxTTL(time.Hour))
	if _, err := big.TryObtain(ctx, "x", time.Second); !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain on a node started just now: %v, want ErrNodeRecovering", err)
	}
	small := newClient(t, cl.clients, WithRestartGuard(GuardOn), WithMaxTTL(2*time.Second))
	_, err := small.TryObtain(ctx, "x", time.Second)
	if !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain of the Client with the smaller max TTL: %v, want ErrNodeRecovering", err)
	}
	if !regexp.MustCompile(`max TTL of at least (59m5\ds|1h0m0s)`).MatchString(err.Error()) {
		t.Errorf("error %q does not give the recorded max TTL of about 1h", err)
	}
	for _, want := range []string{"epoch record", "larger WithMaxTTL than this Client's 2s", "redlock doctor", "A recovery window longer than the max TTL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

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
	// A node that timed out repeatedly under load (the warm-up's
	// requests, 250 ms each) is skipped for a cool-down: wait it out, so
	// that every node is asked.
	eventually(t, "no node skipped", func() bool {
		for _, n := range c.e.nodes {
			if n.Skipped(time.Now()) {
				return false
			}
		}
		return true
	})
	restarted := []int{0, 2, 4}
	for _, i := range restarted {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// Every restarted node answers that it recovers, and no other: asked
	// again, within the first half of the window, where a node did not
	// answer in time (a loaded machine).
	var recovering []int
	for first := time.Now(); ; {
		_, err = c.TryObtain(ctx, "majority", time.Second)
		var qe *QuorumError
		if !errors.As(err, &qe) || !errors.Is(err, ErrNodeRecovering) {
			t.Fatalf("TryObtain with a majority just restarted: %v, want a *QuorumError naming recovering nodes", err)
		}
		recovering = recovering[:0]
		for _, ne := range qe.Nodes {
			if errors.Is(ne.Err, ErrNodeRecovering) {
				recovering = append(recovering, ne.Node)
			}
		}
		if fmt.Sprint(recovering) == fmt.Sprint(restarted) || time.Since(first) > maxTTL/2 {
			break
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

// TestFencingInversionThroughSecondRound reproduces review finding 1 on
// real nodes: a fencing second round that counted a confirmation from a
// node that had not voted for the lock in the first round let a lock be
// granted with a token above that of a lock granted after it.
//
// Three nodes (quorum 2), guard off. Client A's first round wins n1 and n2
// with disagreeing tokens (2 and 1001), so A needs a second round to raise
// a quorum of counters to 1001. Between A's rounds (A's reply from n2 is
// held back, as if A's process paused), client B takes n3 with token 2 and
// waits on n1, which is frozen. A's second round then reaches n2 and n3
// only. Counting n3 (the old rule), A is granted with token 1001; B's
// request runs on n1 once A's key there has expired, and B is granted
// after A with token 3. Counting first-round yes-voters only (n1, n2), A's
// second round cannot reach a quorum and A is refused.
//
// Every step waits for the previous one to have happened on the nodes;
// the only waits on the clock are the expiry of A's key on n1 and the node
// timeouts, each with a margin of a second or more.
func TestFencingInversionThroughSecondRound(t *testing.T) {
	const (
		name   = "inversion"
		key    = "{redlock:" + name + "}"
		ttlA   = 2 * time.Second
		ttlB   = 30 * time.Second
		margin = time.Second
	)
	cl := startNodes(t, 3)
	ctx := context.Background()

	// A's first-round votes will disagree: n2's counter is far ahead.
	for i, v := range []int{1, 1000, 1} {
		if err := cl.clients[i].HSet(ctx, key+":fence", "v", v, "e", "off").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Another owner's leftover on n3, so that A wins n1 and n2 only. The
	// test deletes it once A's request has run on n3 (its own expiry is a
	// back-stop only).
	if err := cl.clients[2].Set(ctx, key, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	// A and B each have their own go-redis clients, so that hooks on A's
	// touch A's requests only.
	var aNodes, bNodes []redis.UniversalClient
	for _, s := range cl.servers {
		a := s.Client()
		// B waits on frozen n1 for seconds: go-redis's default read
		// timeout (3 s) must not cut it before B's node timeout.
		b := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: 20 * time.Second})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		// A connection in each of B's pools before n1 freezes, so that B's
		// request to n1 is queued on the node, not stuck in a handshake.
		if err := b.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		aNodes, bNodes = append(aNodes, a), append(bNodes, b)
	}

	ranOn := []*signal{newSignal(), newSignal(), newSignal()} // A's acquire reply received from node i
	resume := newSignal()                                     // lets A's reply from n2 through
	t.Cleanup(resume.fire)
	for i, n := range aNodes {
		n.(*redis.Client).AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if i == 0 && isFence(cmd) {
				// A's fence request to n1 is lost: n1 is frozen by
				// then, and on SIGCONT the order in which n1 would serve
				// it and B's queued acquire is the kernel's. Lost, it
				// cannot raise n1's counter before B's acquire there.
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Second):
				}
				cmd.SetErr(context.DeadlineExceeded)
				return cmd.Err()
			}
			err := next(ctx, cmd)
			if err == nil && isAcquire(cmd) {
				ranOn[i].fire()
				if i == 1 {
					// A pauses between its rounds: its round needs n2, so
					// it ends (and the second round starts) only when the
					// test lets this reply through.
					select {
					case <-resume.c:
					case <-time.After(20 * time.Second):
					}
				}
			}
			return err
		}))
	}
	aEvents := &eventRecorder{}
	a := newClient(t, aNodes, WithNodeTimeout(1500*time.Millisecond), WithHook(aEvents))
	b := newClient(t, bNodes, WithNodeTimeout(8*time.Second))
	t.Cleanup(func() { _ = cl.servers[0].Resume() }) // before the Clients close

	type result struct {
		l   *Lock
		err error
	}
	aDone, bDone := make(chan result, 1), make(chan result, 1)
	aStart := time.Now()
	go func() {
		l, err := a.TryObtain(ctx, name, ttlA)
		aDone <- result{l, err}
	}()
	// A's acquire has run on every node: yes on n1 and n2, no on n3.
	aOnN1 := ranOn[0].wait(t, "A's acquire ran on n1")
	ranOn[1].wait(t, "A's acquire ran on n2")
	ranOn[2].wait(t, "A's acquire ran on n3")

	// While A is paused: n3 is free again, n1 freezes, and B asks all
	// three. n3 says yes (token 2), n2 no (A's key), n1 queues the request.
	if err := cl.clients[2].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := b.TryObtain(ctx, name, ttlB)
		bDone <- result{l, err}
	}()
	eventually(t, "B's key is on n3", func() bool {
		_, ok := rawGet(t, cl.clients[2], name)
		return ok
	})
	if held := time.Since(aStart); held > 1200*time.Millisecond {
		// A's round times out on n2 after 1.5 s: it would fail in its
		// first round, and the test would prove nothing.
		t.Fatalf("A was held %v, too close to its 1.5 s node timeout: the machine is too slow for this schedule", held)
	}

	// A resumes: its second round reaches n2 and n3; n1 is frozen.
	resume.fire()
	var ra result
	select {
	case ra = <-aDone:
	case <-time.After(30 * time.Second):
		t.Fatal("A's TryObtain did not return")
	}
	if ra.err == nil {
		t.Logf("A granted with token %d", ra.l.Token())
	} else {
		t.Logf("A refused: %v", ra.err)
	}

	// Once A's key on n1 has expired (it was set before A's reply from n1
	// arrived), n1 thaws and serves B's queued acquire: yes, token 3.
	time.Sleep(time.Until(aOnN1.Add(ttlA + margin)))
	if err := cl.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	var rb result
	select {
	case rb = <-bDone:
	case <-time.After(30 * time.Second):
		t.Fatal("B's TryObtain did not return")
	}
	if rb.err != nil {
		t.Fatalf("B, asking after A's attempt, was refused: %v", rb.err)
	}
	t.Logf("B granted with token %d", rb.l.Token())

	if ra.err == nil && rb.l.Token() <= ra.l.Token() {
		t.Fatalf("B was granted after A with token %d, not above A's %d: a token inversion", rb.l.Token(), ra.l.Token())
	}
	// A must have been refused in its second round: its first round won
	// (n1 and n2), so the reproduction reached the rule under test.
	var qe *QuorumError
	if !errors.As(ra.err, &qe) || !errors.Is(ra.err, ErrNotObtained) || qe.Op != "obtain (fencing token)" {
		t.Fatalf("A: %v; want refused in its fencing second round", ra.err)
	}
	// A gave back the lock of its won first round, which it never
	// returned: its hook hears no release of it (see Hook).
	aEvents.mu.Lock()
	if len(aEvents.releases) != 0 || len(aEvents.lost) != 0 {
		t.Errorf("A's hook heard releases %+v and losses %+v of a lock A never returned", aEvents.releases, aEvents.lost)
	}
	aEvents.mu.Unlock()
	_ = rb.l.Release(ctx)
}

// Issue 48, K1: a node restarted with its data recovers from its process
// start, not from its next guarded request, so a quiet deployment's
// rolling restart spaced by more than the max TTL ends with every node
// but the last voting. The nodes keep their data in an AOF with
// appendfsync always; no Client sends anything between the restarts (the
// Clients of these tests keep no configuration records, newClient).

// startAOFNodes starts n nodes that keep every acknowledged write in an AOF.
func startAOFNodes(t *testing.T, n int) *cluster {
	t.Helper()
	cl := &cluster{servers: redistest.Start(t, n, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})}
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cl.clients = append(cl.clients, c)
	}
	return cl
}

// restartWithData kills node i and starts it again from its AOF
// (crashFromSnapshot), and returns the time once it answers (no earlier
// than the new process's start). The node's epoch record survives,
// naming the old process.
func restartWithData(t *testing.T, cl *cluster, i int) time.Time {
	t.Helper()
	crashFromSnapshot(t, cl, i)
	up := time.Now()
	if !recordOfAnotherProcess(t, cl.clients[i]) {
		t.Fatalf("node %d: the premise, its epoch record kept from before the restart", i)
	}
	return up
}

// recordOfAnotherProcess reports whether node's epoch record exists and
// names another process than the node's: no guarded request has reached
// it since it restarted or was promoted.
func recordOfAnotherProcess(t *testing.T, node redis.UniversalClient) bool {
	t.Helper()
	ctx := context.Background()
	run, err := node.HGet(ctx, "{"+limits.Prefix+"}:epoch", "run").Result()
	if err != nil {
		return false
	}
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	return !strings.Contains(info, "run_id:"+run)
}

// votesNow reports whether node votes for a guarded Client at once: a
// single-node TryObtain of a name of its own (the guarded request a
// readiness probe makes too). It fails the test on any other refusal.
func votesNow(t *testing.T, node redis.UniversalClient) bool {
	t.Helper()
	ctx := context.Background()
	l, err := guardOn(t, []redis.UniversalClient{node}).TryObtain(ctx, "votes-now", time.Second)
	if err == nil {
		_ = l.Release(ctx)
		return true
	}
	if !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("a single-node TryObtain: %v, want success or ErrNodeRecovering", err)
	}
	return false
}

// quietStep is the wait between two steps of a rollout, from the last
// one's process start: more than the max TTL, plus the 2 s by which the
// guard may place the start late (uptime_in_seconds is the difference of
// two whole-second clocks), plus a margin.
const quietStep = guardMaxTTL + 3*time.Second

// endsVoting checks the end of a rollout whose last step was node last:
// a guarded Client's TryObtain succeeds at once (nodes' is the Client's
// view), and every other node votes at once.
func endsVoting(t *testing.T, cl *cluster, nodes []redis.UniversalClient, last int, stepped time.Time) {
	t.Helper()
	ctx := context.Background()
	l, err := guardOn(t, nodes).TryObtain(ctx, "after-rollout", time.Second)
	if err != nil {
		t.Fatalf("TryObtain right after the rollout: %v", err)
	}
	t.Logf("obtained %v after the last step", time.Since(stepped).Round(time.Millisecond))
	_ = l.Release(ctx)
	for i, n := range nodes {
		if i != last && !votesNow(t, n) {
			t.Errorf("node %d, restarted more than the max TTL ago, does not vote", i)
		}
	}
}

// TestQuietRollingRestartEndsVoting restarts each of 3 nodes in turn, more
// than the max TTL apart, with no request in between: right after the
// last restart a lock is obtained, and the first two nodes vote. Before
// K1's fix each restarted node recovered from the first request after the
// rollout, and TryObtain failed with every node recovering.
func TestQuietRollingRestartEndsVoting(t *testing.T) {
	cl := startAOFNodes(t, 3)
	for _, n := range cl.clients {
		waitVoting(t, n) // writes each node's epoch record
	}
	var at time.Time
	for i := range cl.clients {
		time.Sleep(time.Until(at.Add(quietStep)))
		at = restartWithData(t, cl, i)
	}
	endsVoting(t, cl, cl.clients, 2, at)
}

// TestQuietRollingRestartWithAFailover is the rollout with one node failed
// over to its replica (REPLICAOF NO ONE, and the node's address moved to
// it, as Sentinel or a Service does). A promoted replica's process started
// long before its promotion, so it recovers for the max TTL from the first
// guarded request after it: as the rollout's last step, the others vote;
// in the middle of it, a guarded request right after the promotion (what
// a readiness probe that runs the guard sends) starts that recovery then.
func TestQuietRollingRestartWithAFailover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed int  // the node failed over
		probed bool // a guarded request right after the promotion
	}{
		{"failover last", 2, false},
		{"failover in the middle, probed", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startAOFNodes(t, 3)
			ctx := context.Background()
			replica := redistest.Start(t, 1)[0]
			rc := replica.Client()
			t.Cleanup(func() { _ = rc.Close() })
			moved, target := switchable(t, cl.servers[tc.failed].Addr())
			nodes := append([]redis.UniversalClient(nil), cl.clients...)
			nodes[tc.failed] = moved
			for _, n := range nodes {
				waitVoting(t, n)
			}
			if err := cl.clients[tc.failed].ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", cl.servers[tc.failed].Port()).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the replica has the epoch record", func() bool {
				return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") &&
					rc.Exists(ctx, "{"+limits.Prefix+"}:epoch").Val() == 1
			})
			var at time.Time
			for i := range nodes {
				time.Sleep(time.Until(at.Add(quietStep)))
				if i != tc.failed {
					at = restartWithData(t, cl, i)
					continue
				}
				if err := cl.servers[i].Kill(); err != nil {
					t.Fatal(err)
				}
				if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
				addr := replica.Addr()
				target.Store(&addr)
				reachable(t, moved)
				at = time.Now()
				if !recordOfAnotherProcess(t, moved) {
					t.Fatal("the premise: the promoted replica holds its old master's epoch record")
				}
				if tc.probed && votesNow(t, moved) {
					t.Fatal("a promoted replica votes right after its promotion")
				}
			}
			endsVoting(t, cl, nodes, 2, at)
			if !tc.probed && votesNow(t, moved) {
				t.Error("the promoted replica votes at its first guarded request")
			}
		})
	}
}

// TestRestartRecoversFromItsStart: the recovery from the process start
// still keeps out a lock the node forgot. A holds a lock on nodes 0 and 1
// (node 2 missed it); node 1 restarts from a snapshot taken before, and
// forgets it. C, cut off from node 0, asks nodes 1 and 2, which both lack
// the key: node 1 refuses as recovering until its process start plus the
// max TTL, by when A's lock has expired, and C's token is above A's.
func TestRestartRecoversFromItsStart(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	for _, n := range cl.clients {
		waitVoting(t, n)
	}
	snapshot(t, cl, 1) // the epoch record, without A's lock
	a, err := guardOn(t, cutOff(t, cl.clients, 2, cl.servers[2].Addr())).TryObtain(ctx, "forgotten", guardMaxTTL)
	if err != nil {
		t.Fatalf("A's TryObtain with node 2 cut off: %v", err)
	}
	restarted := time.Now()
	crashFromSnapshot(t, cl, 1)
	if _, ok := rawGet(t, cl.clients[1], "forgotten"); ok || !recordOfAnotherProcess(t, cl.clients[1]) {
		t.Fatal("the premise: node 1 restored its epoch record but not A's lock")
	}
	c := guardOn(t, cutOff(t, cl.clients, 0, cl.servers[0].Addr()))
	for {
		l, err := c.TryObtain(ctx, "forgotten", time.Second)
		if err == nil {
			got := time.Now()
			if got.Before(restarted.Add(guardMaxTTL)) {
				t.Fatalf("C obtained A's forgotten lock %v after node 1's restart, before the max TTL %v", got.Sub(restarted), guardMaxTTL)
			}
			if got.Before(a.ValidUntil()) || l.Token() <= a.Token() {
				t.Fatalf("C's lock (token %d) while A's (token %d) is valid until %v", l.Token(), a.Token(), a.ValidUntil())
			}
			t.Logf("C obtained it %v after the restart (max TTL %v)", got.Sub(restarted).Round(time.Millisecond), guardMaxTTL)
			_ = l.Release(ctx)
			return
		}
		var qe *QuorumError
		if !errors.As(err, &qe) || !slices.ContainsFunc(qe.Nodes, func(n NodeResult) bool { return n.Node == 1 && errors.Is(n.Err, ErrNodeRecovering) }) {
			t.Fatalf("C's TryObtain: %v, want node 1 recovering", err)
		}
		if time.Since(restarted) > 10*guardMaxTTL {
			t.Fatalf("node 1 still recovers %v after its restart", time.Since(restarted))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
