package redlock

import (
	"context"
	"errors"
	"fmt"
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
