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

	"github.com/redlock-go/redlock/internal/quorum"
)

// Tests of the acquire round (acquire.go): one winner among many, a
// minority or majority of nodes down or frozen, each node's reason, and
// the second round's QuorumError.

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
