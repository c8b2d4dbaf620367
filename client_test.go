package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

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

// nilHook is a Hook whose typed nil would panic when observed.
type nilHook struct{ n int }

func (h *nilHook) Observe(context.Context, Event) { h.n++ }

// Every nil or typed-nil input of New, NewFromNodes, the options and the
// handles is refused with ErrInvalid, and nothing panics, at New or at the
// first obtain.
func TestInvalidNilInputs(t *testing.T) {
	cl := startNodes(t, 1)
	nodes := cl.clients
	var nilLeases *localLeases
	var nilOption Option
	cases := []struct {
		name string
		new  func() (*Client, error)
	}{
		{"New typed nil *redis.Client", func() (*Client, error) {
			return New([]redis.UniversalClient{(*redis.Client)(nil)})
		}},
		{"New typed nil *redis.ClusterClient", func() (*Client, error) {
			return New([]redis.UniversalClient{nodes[0], (*redis.ClusterClient)(nil)})
		}},
		{"New nil client", func() (*Client, error) { return New([]redis.UniversalClient{nil}) }},
		{"NewFromNodes nil node", func() (*Client, error) { return NewFromNodes([]driver.Node{nil}) }},
		{"NewFromNodes typed nil node", func() (*Client, error) {
			return NewFromNodes([]driver.Node{goredis.New(nodes[0]), (*nilNode)(nil)})
		}},
		{"nil option", func() (*Client, error) { return New(nodes, nilOption) }},
		{"WithClock(nil)", func() (*Client, error) { return New(nodes, WithClock(nil)) }},
		{"WithHook(nil)", func() (*Client, error) { return New(nodes, WithHook(nil)) }},
		{"WithHook(typed nil)", func() (*Client, error) { return New(nodes, WithHook((*nilHook)(nil))) }},
		{"JoinHooks with nil", func() (*Client, error) { return New(nodes, WithHook(JoinHooks(&nilHook{}, nil))) }},
		{"JoinHooks with typed nil", func() (*Client, error) {
			return New(nodes, WithHook(JoinHooks((*nilHook)(nil))))
		}},
		{"WithDegradedMode(nil)", func() (*Client, error) { return New(nodes, WithDegradedMode(nil)) }},
		{"WithDegradedMode(typed nil)", func() (*Client, error) { return New(nodes, WithDegradedMode(nilLeases)) }},
		{"WithBackoff(nil)", func() (*Client, error) { return New(nodes, WithBackoff(nil)) }},
		{"WithMaxTTL above the bound", func() (*Client, error) { return New(nodes, WithMaxTTL(limits.MaxMaxTTL+time.Millisecond)) }},
		{"WithMaxTTL(MaxInt64)", func() (*Client, error) { return New(nodes, WithMaxTTL(1<<63-1)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panicked: %v", p)
				}
			}()
			c, err := tc.new()
			if c != nil {
				// Accepted: the first obtain must not panic either.
				defer c.Close()
				l, oerr := c.TryObtain(context.Background(), "x", time.Second)
				_ = l.Release(context.Background())
				t.Fatalf("accepted (first obtain: %v), want ErrInvalid", oerr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	}

	// The handles' and the Client's calls.
	c := newClient(t, nodes)
	var nilCtx context.Context
	var nilObtainOption ObtainOption
	calls := []struct {
		name string
		call func() error
	}{
		{"Obtain nil context", func() error { _, err := c.Obtain(nilCtx, "x", time.Second); return err }},
		{"TryObtain nil context", func() error { _, err := c.TryObtain(nilCtx, "x", time.Second); return err }},
		{"Do nil context", func() error { return c.Do(nilCtx, "x", time.Second, func(context.Context) error { return nil }) }},
		{"Mutex Obtain nil context", func() error { _, err := c.Mutex("x").Obtain(nilCtx, time.Second); return err }},
		{"Semaphore TryObtain nil context", func() error { _, err := c.Semaphore("s", 2).TryObtain(nilCtx, time.Second); return err }},
		{"All Obtain nil context", func() error { _, err := c.All("a", "b").Obtain(nilCtx, time.Second); return err }},
		{"Any Do nil context", func() error {
			return c.Any("a", "b").Do(nilCtx, time.Second, func(context.Context) error { return nil })
		}},
		{"Resume nil context", func() error {
			// A well-formed form: only the context is wrong.
			form := fmt.Sprintf(`{"v":1,"prefix":%q,"nodes":%d,"name":"x","kind":"plain","secret":"s","token":1,"ttl_ms":1000}`, c.e.cfg.prefix, len(nodes))
			_, err := c.Resume(nilCtx, []byte(form))
			return err
		}},
		{"nil obtain option", func() error { _, err := c.Obtain(context.Background(), "x", time.Second, nilObtainOption); return err }},
		{"Do nil function", func() error { return c.Do(context.Background(), "x", time.Second, nil) }},
		{"Mutex Do nil function", func() error { return c.Mutex("x").Do(context.Background(), time.Second, nil) }},
		{"WithBackoff(nil) on an obtain", func() error { _, err := c.Obtain(context.Background(), "x", time.Second, WithBackoff(nil)); return err }},
		{"Reentrant empty owner", func() error { _, err := c.Reentrant("x", "").Obtain(context.Background(), time.Second); return err }},
		{"Semaphore of 0", func() error { _, err := c.Semaphore("x", 0).Obtain(context.Background(), time.Second); return err }},
		{"All of none", func() error { _, err := c.All().Obtain(context.Background(), time.Second); return err }},
		{"Any of none", func() error { _, err := c.Any().Obtain(context.Background(), time.Second); return err }},
		{"Refresh nil context", func() error {
			l, err := c.Obtain(context.Background(), "r", time.Second)
			if err != nil {
				return err
			}
			defer l.Release(context.Background())
			return l.Refresh(nilCtx, time.Second)
		}},
	}
	// A nil context given to Release counts as context.Background(): the
	// lock is released, not left held.
	l, err := c.Obtain(context.Background(), "nil-release", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil): %v", err)
	}
	if l2, err := c.TryObtain(context.Background(), "nil-release", time.Second); err != nil {
		t.Fatalf("TryObtain after Release(nil): %v", err)
	} else {
		_ = l2.Release(context.Background())
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panicked: %v", p)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	}
}

// nilNode is a driver.Node of the test's own, for its typed nil.
type nilNode struct{ driver.Node }

// oddClient is a redis.UniversalClient of a type that cannot be compared
// with ==: New must not panic comparing two of them.
type oddClient struct {
	redis.UniversalClient
	tags []string
}

func TestNewUncomparableClientsDoNotPanic(t *testing.T) {
	cl := startNodes(t, 1)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("New panicked: %v", p)
		}
	}()
	// Two wrappers of one client: whether New tells them apart is the
	// business of its same-server check; here it must only not panic.
	a, b := oddClient{cl.clients[0], nil}, oddClient{cl.clients[0], []string{"b"}}
	c, err := New([]redis.UniversalClient{a, b})
	if err == nil {
		_ = c.Close()
	}
}

// Nil nodes, typed nils behind the interfaces included, are refused with
// ErrInvalid and an error that says which node is nil; nothing panics. No
// server is needed: New and NewFromNodes do no I/O.
func TestNilNodesAreInvalid(t *testing.T) {
	live := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = live.Close() })
	for _, c := range []struct {
		name  string
		nodes []redis.UniversalClient
	}{
		{"nil interface", []redis.UniversalClient{nil}},
		{"(*redis.Client)(nil)", []redis.UniversalClient{(*redis.Client)(nil)}},
		{"(*redis.ClusterClient)(nil)", []redis.UniversalClient{live, (*redis.ClusterClient)(nil)}},
		{"(*redis.Ring)(nil)", []redis.UniversalClient{(*redis.Ring)(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := New(c.nodes)
			if err == nil {
				_ = cl.Close()
				t.Fatal("New accepted a nil client")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("New: %v, want ErrInvalid naming the nil client", err)
			}
		})
	}
	for _, c := range []struct {
		name  string
		nodes []driver.Node
	}{
		{"nil driver.Node", []driver.Node{nil}},
		{"(*goredis.Node)(nil)", []driver.Node{(*goredis.Node)(nil)}},
		{"goredis.New of a typed nil", []driver.Node{goredis.New(live), goredis.New((*redis.Client)(nil))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := NewFromNodes(c.nodes)
			if err == nil {
				_ = cl.Close()
				t.Fatal("NewFromNodes accepted a nil node")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("NewFromNodes: %v, want ErrInvalid naming the nil node", err)
			}
		})
	}
}

// TestSentinelNode uses a Sentinel-managed master as a single node: locks
// work through a failover client, and keep working once it has followed a
// failover to the promoted replica.
func TestSentinelNode(t *testing.T) {
	start := time.Now()
	d := redistest.StartSentinelT(t, "redlock-test")
	t.Logf("sentinel deployment up in %v", time.Since(start).Round(time.Millisecond))
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	c := newClient(t, []redis.UniversalClient{fc}, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()

	lock, err := c.TryObtain(ctx, "sentinel", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	if err := lock.Refresh(ctx, 20*time.Second); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	promoted := d.Replica.Addr()
	start = time.Now()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", promoted, time.Since(start).Round(time.Millisecond))
	if got := d.Master.Addr(); got != promoted {
		t.Fatalf("Master after Failover is %s, want the promoted replica %s", got, promoted)
	}
	if addr, err := d.MasterAddr(ctx); err != nil || addr != promoted {
		t.Fatalf("MasterAddr = %q, %v; want %s", addr, err, promoted)
	}

	// The failover client learns of the new master from the sentinels'
	// +switch-master message and until then may still write to the old one,
	// which stays a master until the sentinels demote it: poll until a lock
	// lands on the new master.
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	var after *Lock
	start = time.Now()
	eventually(t, "a lock is obtained on the new master", func() bool {
		l, err := c.TryObtain(ctx, "sentinel-after", 10*time.Second)
		if err != nil {
			return false
		}
		if v, ok := rawGet(t, master, "sentinel-after"); !ok || v != l.secret.id {
			_ = l.Release(ctx)
			return false
		}
		after = l
		return true
	})
	t.Logf("first lock after failover obtained %v after it", time.Since(start).Round(time.Millisecond))
	if err := after.Release(ctx); err != nil {
		t.Fatalf("Release after failover: %v", err)
	}
	if _, ok := rawGet(t, master, "sentinel-after"); ok {
		t.Error("the new master still has the key after Release")
	}
}

// The restart guard and WithReplicaAck on a Sentinel-managed node: a vote
// the replica did not acknowledge is refused; after a failover the promoted
// replica, which holds a copy of its old master's epoch record, answers
// "recovering" for the recovery window; then tokens go on increasing.
func TestSentinelFailoverGuard(t *testing.T) {
	sentinelFailoverGuard(t, "redlock-guard")
}

// The same with WithTrustedPersistence (review finding 3): trusting
// persistence spares a restart that kept its data the recovery, not a
// promotion, since the promoted replica may lack its old master's latest
// locks. (epoch.lua before 7155e55 skipped the recovery on any change of
// run_id in this mode, promotions included: the promoted replica voted at
// once.)
func TestSentinelFailoverGuardTrustedPersistence(t *testing.T) {
	sentinelFailoverGuard(t, "redlock-guard-p", WithRestartGuard(GuardTrustPersistence))
}

// sentinelFailoverGuard runs the failover guard scenario on a new Sentinel
// deployment named name, with guard opts given to every client.
func sentinelFailoverGuard(t *testing.T, name string, opts ...Option) {
	const maxTTL = 2 * time.Second
	d := redistest.StartSentinelT(t, name)
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	node := []redis.UniversalClient{fc}
	with := func(o ...Option) []Option { return append(o, opts...) }
	c := guarded(t, node, maxTTL, with(WithNodeTimeout(500*time.Millisecond))...)
	acked := guarded(t, node, maxTTL, with(WithNodeTimeout(500*time.Millisecond), WithReplicaAck(1, 200*time.Millisecond))...)
	ctx := context.Background()

	before, err := acked.TryObtain(ctx, "failover", time.Second)
	if err != nil {
		t.Fatalf("TryObtain with a replica acknowledging: %v", err)
	}
	_ = before.Release(ctx)

	// A replica that does not answer cannot acknowledge: the vote is refused
	// and the key taken on the master is given back.
	if err := d.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = acked.TryObtain(ctx, "unacked", time.Second)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("TryObtain with the replica frozen: %v, want ErrNotReplicated", err)
	}
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	if _, ok := rawGet(t, master, "unacked"); ok {
		t.Fatal("the master kept the key of a vote the replica did not acknowledge")
	}
	if err := d.Replica.Resume(); err != nil {
		t.Fatal(err)
	}
	// The token so far, and the epoch record, reach the replica.
	if err := master.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	// The replica's copy of the epoch record is that of the old master's
	// last acquire, all before this (nothing runs there while the lock is
	// free), and is frozen by the promotion.
	lastOnOld := time.Now()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// That copy says the identity was checked at the old master's last
	// acquire; the check is trusted for limits.EpochTrust only, so the promoted
	// replica runs its own check, and sees the promotion, if the failover
	// took longer.
	if took := time.Since(lastOnOld); took <= limits.EpochTrust {
		t.Fatalf("failover took %v, within limits.EpochTrust %v: the guard may not see it", took, limits.EpochTrust)
	}
	// Once the failover client follows the promoted replica, it answers
	// recovering (the old master, until the sentinels demote it, may still
	// answer normally: retry).
	eventually(t, "the promoted replica answers recovering", func() bool {
		l, err := c.TryObtain(ctx, "failover", time.Second)
		if err == nil {
			_ = l.Release(ctx)
			return false
		}
		return errors.Is(err, ErrNodeRecovering)
	})
	wctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	after, err := c.Obtain(wctx, "failover", time.Second)
	if err != nil {
		t.Fatalf("Obtain after the recovery window: %v", err)
	}
	if after.Token() <= before.Token() {
		t.Fatalf("token %d after the failover, %d before: want larger", after.Token(), before.Token())
	}
	_ = after.Release(ctx)
}

// TestSentinelFamily runs the lock family on a Sentinel-managed master
// with the restart guard, before and after a failover: a reentrant owner
// re-enters through a second Client with its token, readers share the
// lock and keep a writer out; after the failover the promoted replica
// answers recovering, then the owner's next tenure gets a larger token,
// and readers and a writer go on in token order on the new master.
func TestSentinelFamily(t *testing.T) {
	const maxTTL = 2 * time.Second
	d := redistest.StartSentinelT(t, "redlock-family")
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	node := []redis.UniversalClient{fc}
	c := guarded(t, node, maxTTL, WithNodeTimeout(500*time.Millisecond))
	c2 := guarded(t, node, maxTTL, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	const ttl = time.Second
	key := "{" + limits.Prefix + "job}"

	// reentrant: the owner's hold on c, a re-entry on c2 with its token,
	// a reader and another owner refused; both released. It returns the
	// token.
	reentrant := func(obtain func() (*Lock, error)) int64 {
		t.Helper()
		outer, err := obtain()
		if err != nil {
			t.Fatalf("owner: %v", err)
		}
		inner, err := c2.Reentrant("job", "job-1").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("re-entry through another Client: %v", err)
		}
		if inner.Token() != outer.Token() {
			t.Fatalf("re-entry's token %d, the owner's %d: want equal", inner.Token(), outer.Token())
		}
		if _, err := reader(c, "job").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("a reader while the owner holds: %v, want ErrNotObtained", err)
		}
		if _, err := c.Reentrant("job", "job-2").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("another owner while the owner holds: %v, want ErrNotObtained", err)
		}
		if err := inner.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := outer.Refresh(ctx, ttl); err != nil {
			t.Fatalf("the owner's hold after the inner release: %v", err)
		}
		if err := outer.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return outer.Token()
	}
	// readWrite: two readers share the lock and keep a writer out, then
	// the writer gets it with a larger token. It returns the writer's.
	readWrite := func(after int64) int64 {
		t.Helper()
		// The other owner refused above left its wait mark (for its TTL):
		// the first reader waits behind it.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r1, err := reader(c, "job").Obtain(rctx, ttl)
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		r2, err := reader(c2, "job").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("second reader: %v", err)
		}
		if min(r1.Token(), r2.Token()) <= after {
			t.Fatalf("readers' tokens %d, %d after a hold with %d: want larger", r1.Token(), r2.Token(), after)
		}
		if _, err := writer(c, "job").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("a writer while readers hold: %v, want ErrNotObtained", err)
		}
		_ = r1.Release(ctx)
		_ = r2.Release(ctx)
		w, err := writer(c, "job").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("writer after the readers: %v", err)
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Fatalf("writer's token %d, readers' %d, %d: want larger", w.Token(), r1.Token(), r2.Token())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return w.Token()
	}

	before := reentrant(func() (*Lock, error) { return c.Reentrant("job", "job-1").TryObtain(ctx, ttl) })
	last := readWrite(before)
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	if err := master.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	promoted := d.Replica.Addr()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	newMaster := d.Master.Client()
	t.Cleanup(func() { _ = newMaster.Close() })
	if got := d.Master.Addr(); got != promoted {
		t.Fatalf("Master after Failover is %s, want %s", got, promoted)
	}
	// Once the failover client follows the promoted replica, a family
	// obtain is refused: the node recovers (the old master, until the
	// sentinels demote it, may still answer normally: retry).
	eventually(t, "the promoted replica answers recovering", func() bool {
		l, err := c.Reentrant("job", "job-1").TryObtain(ctx, ttl)
		if err == nil {
			_ = l.Release(ctx)
			return false
		}
		return errors.Is(err, ErrNodeRecovering)
	})
	wctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	var onNew bool
	after := reentrant(func() (*Lock, error) {
		l, err := c.Reentrant("job", "job-1").Obtain(wctx, ttl)
		if err == nil {
			mode, _ := newMaster.HGet(ctx, key, "mode").Result()
			owner, _ := newMaster.HGet(ctx, key, "o").Result()
			onNew = mode == "w" && owner == "job-1"
		}
		return l, err
	})
	if !onNew {
		t.Fatal("the owner's hold after the failover is not on the promoted replica")
	}
	if after <= last {
		t.Fatalf("the owner's token %d after the failover, %d before: want larger", after, last)
	}
	readWrite(after)
	if n, err := newMaster.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("the lock's key on the new master after every release: %d, %v", n, err)
	}
}
