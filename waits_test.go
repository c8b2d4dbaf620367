package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/waitq"
)

// slowRetry makes the timers of a waiter far longer than any test waits:
// only a release notification (or the holder's TTL) can wake it in time.
var slowRetry = WithRetryDelay(time.Minute, 2*time.Minute)

// waitFor obtains name in the background and returns a channel that gets
// the outcome.
func waitFor(c *Client, name string, opts ...ObtainOption) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := c.Obtain(ctx, name, time.Minute, opts...)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	return done
}

// awaitWaiter fails the test unless the waiter's outcome, from done, is a
// success within 15 s; failure names what did not happen.
func awaitWaiter(t *testing.T, done <-chan error, failure string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal(failure)
	}
}

// subscribed reports whether any node has a subscriber on the lock's
// release channel.
func subscribed(t *testing.T, nodes []redis.UniversalClient, name string) bool {
	t.Helper()
	ch := keys.Channel("{" + limits.Prefix + name + "}")
	for _, n := range nodes {
		m, err := n.PubSubNumSub(context.Background(), ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		if m[ch] > 0 {
			return true
		}
	}
	return false
}

func TestReleaseWakesWaiter(t *testing.T) {
	for _, n := range []int{1, 5} {
		for _, same := range []bool{true, false} {
			name := fmt.Sprintf("%d nodes, waiter in the same client=%v", n, same)
			t.Run(name, func(t *testing.T) {
				cl := startNodes(t, n)
				holderClient := newClient(t, cl.clients)
				waiterClient := holderClient
				if !same {
					waiterClient = newClient(t, cl.clients)
				}
				ctx := context.Background()
				holder, err := holderClient.TryObtain(ctx, "wake", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				done := waitFor(waiterClient, "wake", slowRetry)
				eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, "wake") })
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				awaitWaiter(t, done, "the waiter was not woken by the release (its timers are a minute long)")
			})
		}
	}
}

func TestWaiterObtainsAfterExpiryWithoutRelease(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	if _, err := c.TryObtain(context.Background(), "crashed-holder", 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The holder never releases: the waiter's wait is capped by the
	// holder's remaining TTL.
	awaitWaiter(t, waitFor(c, "crashed-holder", slowRetry), "the waiter slept past the holder's TTL")
}

func TestWaitersSurvivePubSubKill(t *testing.T) {
	cl := startNodes(t, 3)
	holderClient := newClient(t, cl.clients)
	waiterClient := newClient(t, cl.clients)
	ctx := context.Background()
	holder, err := holderClient.TryObtain(ctx, "killed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := waitFor(waiterClient, "killed", slowRetry)
	eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, "killed") })
	for _, n := range cl.clients {
		if err := n.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// go-redis reconnects and subscribes again.
	eventually(t, "the subscription is back", func() bool { return subscribed(t, cl.clients, "killed") })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitWaiter(t, done, "the waiter did not obtain the lock after its pub/sub connection was killed")
}

func TestWaitersSurviveNodeRestart(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	if _, err := c.TryObtain(context.Background(), "restarted", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The waiter's attempt after the wake-up must reach the node just
	// restarted (and identify it again: a new identity, identity.go): a
	// second for it, not 250 ms, on a loaded machine. Its passes while the
	// node was down may open the breaker at that attempt: the waiter then
	// waits for the breaker, not its minute-long backoff
	// (TestWaiterRefusedByTheBreakerWaitsForIt; CI hung here before).
	done := waitFor(newClient(t, cl.clients, WithNodeTimeout(time.Second)), "restarted", slowRetry)
	eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, "restarted") })
	// The node restarts empty: the lock is gone without a release, and the
	// broken connection wakes the waiter.
	if err := cl.servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	awaitWaiter(t, done, "the waiter hung after the node restarted")
}

// A waiter whose pass the circuit breaker refused waits for the breaker
// to close, not for its backoff: the breaker opens lazily, at the first
// acquire round after the failures it counts, which can be the round of
// the wake-up that says the node is back (a CI run under load hung here,
// in TestWaitersSurviveNodeRestart, with its minute-long timers).
func TestWaiterRefusedByTheBreakerWaitsForIt(t *testing.T) {
	cl := startNodes(t, 1)
	// A request that outlived the partition (the clean-up of the pass that
	// failed in it) may get its reply before the pass this test is for,
	// so that the breaker never opens: the case is then tried again.
	for try := range 3 {
		if breakerRefusedWaiter(t, cl, fmt.Sprintf("breaker-wait-%d", try)) {
			return
		}
	}
	t.Fatal("in 3 tries, the breaker never refused the waiter's pass (the case this test is for)")
}

// breakerRefusedWaiter makes a waiter's pass be refused by a breaker that
// opens in it, and fails the test unless the waiter then obtains name
// soon. It reports whether the breaker did open.
func breakerRefusedWaiter(t *testing.T, cl *cluster, name string) bool {
	t.Helper()
	c := newClient(t, cl.clients)
	ctx := context.Background()
	// The holder's 2 s bound the waiter's wait before its next pass.
	if _, err := c.TryObtain(ctx, name, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	rec := &eventRecorder{}
	// The waiter reaches the node through a proxy. One request without a
	// reply makes the node unreachable.
	proxied, proxies := proxiedClients(t, cl)
	waiter := newClient(t, proxied, WithNodeTimeout(300*time.Millisecond), WithBreaker(1, 500*time.Millisecond), WithHook(rec))
	done := waitFor(waiter, name, slowRetry)
	eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, name) })
	// A partition that keeps the subscription's connection (a restart
	// breaks it, and every reconnection wakes the waiter again): the
	// waiter's next request (its look for a missed release, or the pass
	// made when the holder's TTL is out) gets no reply, and the breaker
	// counts the node unreachable, without opening yet. The waiter then
	// waits for a notification, or its backoff (a minute).
	proxies[0].SetBlackhole(true)
	eventually(t, "a request without a reply", func() bool { n, _, _ := waiter.e.brk.reachable(false); return n == 0 })
	proxies[0].Heal()
	// The node answers again; a notification wakes the waiter. Its pass
	// finds the breaker opening; the breaker's probe closes it, and the
	// waiter obtains, long before its backoff is out.
	if err := cl.clients[0].Publish(ctx, keys.Channel("{"+limits.Prefix+name+"}"), "released").Err(); err != nil {
		t.Fatal(err)
	}
	awaitWaiter(t, done, "the waiter refused by the breaker slept its backoff (a minute)")
	tr := rec.transitions()
	return len(tr) > 0 && tr[0] == "closed>open"
}

func TestNoSubscriptionOutlivesItsWaiters(t *testing.T) {
	cl := startNodes(t, 3)
	// 40 waiters on a loaded machine: 1 s per node, not the tests' 250 ms.
	opts := []Option{WithNodeTimeout(time.Second)}
	clients := []*Client{newClient(t, cl.clients, opts...), newClient(t, cl.clients, opts...)}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for k := range 10 {
		name := fmt.Sprintf("many-waits-%d", k)
		holder, err := clients[0].TryObtain(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for w := range 4 {
			wg.Go(func() { errs <- <-waitFor(clients[w%2], name) })
		}
		wg.Go(func() {
			time.Sleep(100 * time.Millisecond)
			_ = holder.Release(ctx)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
	for i, n := range cl.clients {
		eventually(t, fmt.Sprintf("node %d has no subscriptions left", i), func() bool {
			chans, err := n.PubSubChannels(ctx, "*").Result()
			return err == nil && len(chans) == 0
		})
	}
	for _, c := range clients {
		for i, h := range c.e.waits.hubs {
			eventually(t, fmt.Sprintf("hub %d forgets its channels", i), func() bool { return h.(interface{ Channels() int }).Channels() == 0 })
		}
		if c.e.waits.queues.Queued("{redlock:many-waits-0}") {
			t.Fatal("a wait queue outlived its waiters")
		}
	}
}

func TestLocalWaitersAreServedInOrder(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	const goroutines, rounds = 8, 25
	var (
		mu    sync.Mutex
		count = map[int]int{}
		wg    sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := c.Obtain(ctx, "fair", time.Minute)
				cancel()
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				mu.Lock()
				count[g]++
				mu.Unlock()
				_ = l.Release(context.Background())
			}
		})
	}
	wg.Wait()
	for g := range goroutines {
		if count[g] != rounds {
			t.Errorf("goroutine %d got the lock %d times, want %d", g, count[g], rounds)
		}
	}
}

func TestReleaseWithoutPubSubPermission(t *testing.T) {
	cl := startNodes(t, 1)
	ctx := context.Background()
	if err := cl.clients[0].Do(ctx, "ACL", "SETUSER", "nopubsub", "on", ">pw", "~*", "&*", "+@all", "-@pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	n := redis.NewClient(&redis.Options{Addr: cl.servers[0].Addr(), Username: "nopubsub", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = n.Close() })
	c := newClient(t, []redis.UniversalClient{n})
	holder, err := c.TryObtain(ctx, "no-pubsub", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter cannot subscribe; it falls back to its timers.
	done := waitFor(c, "no-pubsub", WithRetryDelay(10*time.Millisecond, 50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release when PUBLISH is forbidden: %v", err)
	}
	awaitWaiter(t, done, "the waiter did not obtain the lock")
}

func TestClusterWaiterIsNotified(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	holderClient := newClient(t, []redis.UniversalClient{node})
	waiterClient := newClient(t, []redis.UniversalClient{node})
	ctx := context.Background()
	for i := range 3 {
		name := fmt.Sprintf("cluster-wait-%d", i)
		holder, err := holderClient.TryObtain(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		done := waitFor(waiterClient, name, slowRetry)
		ch := keys.Channel("{" + limits.Prefix + name + "}")
		eventually(t, "the waiter subscribes to the shard channel", func() bool {
			for _, s := range rc.Servers {
				c := s.Client()
				m, err := c.Do(ctx, "PUBSUB", "SHARDNUMSUB", ch).Slice()
				_ = c.Close()
				if err == nil && len(m) == 2 && m[1] == int64(1) {
					return true
				}
			}
			return false
		})
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		awaitWaiter(t, done, "the waiter on a cluster was not woken by the release")
	}
}

// Release notifications wake waiters only for real releases. A failed
// attempt's clean-up used to publish too: each woke the other Clients,
// whose failed attempts cleaned up and published in turn, a storm of
// thousands of wake-ups for a few dozen releases.
func TestNoWakeStorm(t *testing.T) {
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	var clients []*Client
	for range 4 {
		clients = append(clients, newClient(t, cl.clients, WithHook(rec)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		c := clients[g%len(clients)]
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Obtain(ctx, "storm", time.Minute)
				if err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond) // work under the lock
				_ = l.Release(context.Background())
			}
		})
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	woken := 0
	for _, w := range rec.waits {
		if w.WokenBy == "release" {
			woken++
		}
	}
	releases := len(rec.releases)
	// Each release reaches each Client's queue head on up to 3 nodes.
	if releases == 0 || woken > 3*len(clients)*releases {
		t.Fatalf("%d wake-ups by release for %d releases: a storm", woken, releases)
	}
	t.Logf("%d wake-ups by release for %d releases, %d attempts", woken, releases, len(rec.attempts))
}

// A node that never confirms the queue's subscription (frozen, or its
// reply lost) costs the queue's first head its timeout, and not every head
// after it: the lock passes down the queue without that wait.
func TestQueueWaitsForConfirmationsOnce(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	q := unconfirmedQueue()
	c.e.waits.subscribe(context.Background(), q, 10*time.Millisecond) // the first head gives up waiting
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		c.e.waits.subscribe(ctx, q, time.Minute) // the next head
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the next head waits again for a confirmation that did not come for the first")
	}
}

// unconfirmedQueue is a queue subscribed on one node that never confirms.
func unconfirmedQueue() *waitq.Queue {
	never := make(chan struct{})
	return &waitq.Queue{Group: "{redlock:unconfirmed}", Keys: []string{"{redlock:unconfirmed}"}, Wake: driver.NewWaiter(), Confirmed: []<-chan struct{}{never}}
}

// The goroutine that waits for a late confirmation ends when the queue's
// subscriptions are dropped, and when the Client closes, though the
// confirmation never comes (a closed Notifier's never does).
func TestLateConfirmationWatchEnds(t *testing.T) {
	cl := startNodes(t, 1)
	for _, end := range []string{"unsubscribed", "closed"} {
		t.Run(end, func(t *testing.T) {
			// Not closed at the end of the test: a Close that hung here
			// would hang it there too.
			c, err := New(cl.clients, testDefaults(nil)...)
			if err != nil {
				t.Fatal(err)
			}
			before := goleak.IgnoreCurrent()
			q := unconfirmedQueue()
			c.e.waits.subscribe(context.Background(), q, 10*time.Millisecond)
			if q.Late == nil {
				t.Fatal("the head gave up waiting for a confirmation, and nothing watches for it")
			}
			if end == "unsubscribed" {
				c.e.waits.unsubscribe(q)
				defer c.Close()
			} else {
				closed := make(chan struct{})
				go func() {
					_ = c.Close()
					close(closed)
				}()
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Fatal("Close hangs on the goroutine that waits for a late confirmation")
				}
			}
			if err := goleak.Find(before); err != nil {
				t.Fatalf("after the queue was %s: %v", end, err)
			}
		})
	}
}

// The late confirmations are waited for together: one that never comes
// (a node frozen for good) does not hold back the wake-up of another.
func TestLateConfirmationsAreWatchedTogether(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	q := unconfirmedQueue()
	later := make(chan struct{})
	q.Confirmed = append(q.Confirmed, later)
	c.e.waits.subscribe(context.Background(), q, 10*time.Millisecond)
	defer c.e.waits.unsubscribe(q)
	select {
	case <-q.Wake.C:
		t.Fatal("woken before any confirmation came")
	default:
	}
	close(later)
	select {
	case <-q.Wake.C:
	case <-time.After(10 * time.Second):
		t.Fatal("a late confirmation did not wake the head while another had not come")
	}
}

// A node that confirms the queue's subscription later than the node
// timeout is not waited for, and a release that it runs after the head's
// look for a missed release, but before it takes the subscription,
// publishes to nobody there. The late confirmation wakes the head, which
// obtains the lock then: not at the holder's TTL (30 s) nor after its retry
// delay (a minute).
func TestLateConfirmationWakesTheHead(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	holder, err := newClient(t, cl.clients).TryObtain(ctx, "late-sub", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []driver.Node
	var late []*lateNode
	for _, c := range cl.clients {
		n := &lateNode{Node: goredis.New(c), mark: keys.Waiters("{" + limits.Prefix + "late-sub}"), looked: newSignal()}
		nodes, late = append(nodes, n), append(late, n)
	}
	done := waitFor(newClientFrom(t, nodes), "late-sub", slowRetry)
	// The head's subscription is held on every node; it stops waiting for
	// the confirmations at the node timeout (250 ms), looks, and finds the
	// lock held.
	for i, n := range late {
		n.looked.wait(t, fmt.Sprintf("the head's look on node %d", i))
	}
	if subscribed(t, cl.clients, "late-sub") {
		t.Fatal("a node has the subscription that the test holds back")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range late {
		n.hub.letThrough(t)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the head did not obtain within 10 s of the late confirmations (the holder's TTL was 30 s, its retry delay a minute)")
	}
}

// lateNode is a go-redis driver node whose notifier holds back every
// SUBSCRIBE until the test lets it through (lateHub): fault injection,
// standing for a node that takes a subscription later than the node
// timeout (slow under load, or frozen for a while) yet answers the
// Client's other requests. It fires looked when it has run the head's
// look for a missed release (lookForRelease: a pipeline that begins by
// marking the lock, whose keys.Waiters is mark, as waited for).
type lateNode struct {
	driver.Node
	mark   string
	looked *signal
	hub    lateHub
}

func (n *lateNode) Notifier() driver.Notifier {
	n.hub.Notifier = n.Node.Notifier()
	return &n.hub
}

func (n *lateNode) Pipe(ctx context.Context, cmds [][]any) ([]driver.Reply, error) {
	replies, err := n.Node.Pipe(ctx, cmds)
	if len(cmds) > 0 && len(cmds[0]) > 1 && cmds[0][0] == "SET" && cmds[0][1] == n.mark {
		n.looked.fire()
	}
	return replies, err
}

// lateHub holds each Subscribe back until letThrough, and returns a
// confirmation of its own, which letThrough closes once the node has
// confirmed the subscription let through.
type lateHub struct {
	driver.Notifier
	mu   sync.Mutex
	open bool
	held []*heldSub // until unsubscribed
}

type heldSub struct {
	channel   string
	w         *driver.Waiter
	confirmed chan struct{}
	gone      chan struct{} // closed by Unsubscribe
}

func (h *lateHub) Subscribe(channel string, w *driver.Waiter) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open {
		return h.Notifier.Subscribe(channel, w)
	}
	s := &heldSub{channel: channel, w: w, confirmed: make(chan struct{}), gone: make(chan struct{})}
	h.held = append(h.held, s)
	return s.confirmed
}

func (h *lateHub) Unsubscribe(channel string, w *driver.Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = slices.DeleteFunc(h.held, func(s *heldSub) bool {
		if s.channel == channel && s.w == w {
			close(s.gone)
			return true
		}
		return false
	})
	h.Notifier.Unsubscribe(channel, w)
}

// letThrough subscribes on the node for the held Subscribes, and passes
// each confirmation on when the node gives it (a subscription dropped
// before has none); later Subscribes go through at once.
func (h *lateHub) letThrough(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	h.open = true
	held := slices.Clone(h.held)
	confirmed := make([]<-chan struct{}, len(held))
	for i, s := range held {
		confirmed[i] = h.Notifier.Subscribe(s.channel, s.w)
	}
	h.mu.Unlock()
	for i, s := range held {
		select {
		case <-confirmed[i]:
			close(s.confirmed)
		case <-s.gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the node did not confirm a subscription let through")
		}
	}
}

// TryObtain makes its one attempt at once while other goroutines of its
// Client wait for the lock: it does not queue behind them.
func TestTryObtainDoesNotQueue(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	holder, err := c.TryObtain(ctx, "busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := waitFor(c, "busy", slowRetry)
	eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, "busy") })
	for _, try := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := c.TryObtain(ctx, "busy", time.Minute); return err },
		func(ctx context.Context) error {
			_, err := c.Obtain(ctx, "busy", time.Minute, WithMaxAttempts(1))
			return err
		},
	} {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := try(tctx)
		cancel()
		if !errors.Is(err, ErrHeld) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a single attempt while a waiter of the same Client is queued: %v, want ErrHeld at once", err)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitWaiter(t, done, "the queued waiter did not obtain the lock")
}

// TestCancelledAttemptKeepsTheReason: a waiting Obtain whose context ends
// during an attempt reports why the last whole attempt failed (ErrHeld),
// joined with the context's error, not the cut-short attempt's "context
// canceled" from every node. The hook cancels the context inside the
// second attempt's acquire, which a cancel from the caller can hit on a
// loaded machine.
func TestCancelledAttemptKeepsTheReason(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	holder := newClient(t, []redis.UniversalClient{dial(t, s.Addr())})
	ctx := context.Background()
	if _, err := holder.TryObtain(ctx, "held", time.Minute); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acquires atomic.Int32
	node := dial(t, s.Addr())
	node.(*redis.Client).AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isAcquire(cmd) && acquires.Add(1) == 2 {
			cancel()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}))
	waiter := newClient(t, []redis.UniversalClient{node})
	_, err := waiter.Obtain(wctx, "held", time.Minute, WithRetryDelay(time.Millisecond, 2*time.Millisecond))
	if !errors.Is(err, ErrHeld) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Obtain cancelled during its second attempt: %v; want ErrHeld joined with context.Canceled", err)
	}
	if n := acquires.Load(); n != 2 {
		t.Fatalf("%d acquires, want 2", n)
	}
}

// A re-entry never waits behind a waiter of its own Client: here the head
// of the name's queue is a writer waiting for the owner's own lock, and a
// nested Do of the owner must run at once, not wait until its context ends.
func TestReentryDoesNotWaitBehindALocalWaiter(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			key, err := c.e.layout.redisKey("nested")
			if err != nil {
				t.Fatal(err)
			}
			err = c.Reentrant("nested", "job-1").Do(ctx, 30*time.Second, func(ctx context.Context) error {
				wctx, stop := context.WithCancel(ctx)
				defer stop()
				writerDone := make(chan error, 1)
				go func() {
					l, err := writer(c, "nested").Obtain(wctx, 30*time.Second)
					_ = l.Release(context.Background())
					writerDone <- err
				}()
				eventually(t, "the writer queued behind the owner's lock", func() bool { return c.e.waits.queues.Queued(key) })
				// Generous: a re-entry takes a round trip, and the bug
				// made it wait for this context to end.
				ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				inner := c.Reentrant("nested", "job-1").Do(ictx, 30*time.Second, func(context.Context) error { return nil })
				stop()
				if werr := <-writerDone; werr == nil {
					t.Error("the writer obtained the lock while the owner held it")
				}
				return inner
			})
			if err != nil {
				t.Fatalf("nested Do of the owner: %v", err)
			}
		})
	}
}

// A waiter whose retry delay is far longer than the test wakes when a
// permit is released: by the release's notification.
func TestPermitNotifiedWait(t *testing.T) {
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	holder := newClient(t, cl.clients)
	c := newClient(t, cl.clients, WithHook(rec))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []*Lock
	for range 2 {
		l, err := holder.Semaphore("notify", 2).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Semaphore("notify", 2).Obtain(ctx, time.Minute, WithRetryDelay(time.Hour, time.Hour))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	// Let the waiter fail its first attempt and subscribe: the release
	// must come after a node has its subscription, or nothing would be
	// published to it (a subscription that the nodes confirm later than
	// the node timeout is not waited for: docs/waiting.md).
	eventually(t, "the waiter's first attempt", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.attempts) > 0
	})
	eventually(t, "the waiter's subscription", func() bool { return subscribed(t, cl.clients, "notify") })
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not wake within 30 s of a release (its retry delay is an hour)")
	}
	t.Logf("woken %v after the release", time.Since(start))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	woken := false
	for _, w := range rec.waits {
		woken = woken || w.WokenBy == "release"
	}
	if !woken {
		t.Errorf("no wait woken by a release: %+v", rec.waits)
	}
	_ = held[0].Release(ctx)
}

// releaseOnRefusal is a hook that releases a permit right after the first
// refused attempt it sees: after the waiter's attempt, before its
// subscription, so that the release's notification reaches no one.
type releaseOnRefusal struct {
	once sync.Once
	p    *Lock
}

func (h *releaseOnRefusal) Observe(_ context.Context, ev Event) {
	if e, ok := ev.(AttemptEvent); ok && !e.Obtained {
		h.once.Do(func() { _ = h.p.Release(context.Background()) })
	}
}

// A permit released between a waiter's refused attempt and its
// subscription sends a notification nobody hears; the waiter, once
// subscribed, finds the free permit on the nodes (lookForRelease) instead
// of sleeping until its retry delay (an hour) or the other permit's expiry
// (a minute).
func TestPermitReleaseBeforeSubscription(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			holder := newClient(t, cl.clients)
			ctx := context.Background()
			var held []*Lock
			for range 2 {
				p, err := holder.Semaphore("missed", 2).TryObtain(ctx, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, p)
			}
			defer func() { _ = held[1].Release(ctx) }()
			h := &releaseOnRefusal{p: held[0]}
			c := newClient(t, cl.clients, WithHook(h))
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			p, err := c.Semaphore("missed", 2).Obtain(wctx, time.Minute, WithRetryDelay(time.Hour, time.Hour))
			if err != nil {
				t.Fatalf("the waiter missed the free permit: %v", err)
			}
			_ = p.Release(ctx)
		})
	}
}
