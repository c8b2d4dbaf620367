package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// redlock over auto-pipelined go-redis nodes, one of three frozen, under
// the load of 64 goroutines: every TryObtain returns within its node
// timeout (plus a loaded machine's margin) and obtains on the live
// nodes; each lock is its own (a reply mixed between requests would give
// a goroutine another's token or outcome). On both option sets.
func TestAutoPipeliningFrozenNodeRedlock(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
	const (
		goroutines  = 64
		nodeTimeout = 250 * time.Millisecond
		margin      = 2 * time.Second
	)
	for _, deadline := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", deadline), func(t *testing.T) {
			servers := redistest.Start(t, 3)
			var nodes []driver.Node
			for _, s := range servers {
				rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: deadline})
				t.Cleanup(func() { _ = rc.Close() })
				nodes = append(nodes, goredis.New(rc))
			}
			c, err := redlock.NewFromNodes(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithRestartGuard(redlock.GuardOff))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cycles := func(what string, rounds int, bound time.Duration) {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range rounds {
							name := fmt.Sprintf("%s-%d-%d", what, g, i)
							start := time.Now()
							l, err := c.TryObtain(context.Background(), name, time.Minute)
							if took := time.Since(start); bound > 0 && took > bound {
								t.Errorf("%s: TryObtain took %v, with a node timeout of %v", name, took, nodeTimeout)
							}
							if err != nil {
								t.Errorf("%s: TryObtain: %v", name, err)
								return
							}
							if l.Name() != name {
								t.Errorf("TryObtain of %s returned the lock of %s", name, l.Name())
							}
							if err := l.Release(context.Background()); err != nil {
								t.Errorf("%s: Release: %v", name, err)
							}
						}
					})
				}
				wg.Wait()
			}
			cycles("healthy", 20, 0)
			if err := servers[2].Pause(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = servers[2].Resume() }()
			cycles("frozen", 3, nodeTimeout+margin)
		})
	}
}

// counting is a node that counts the requests waiting in its Do.
type counting struct {
	driver.Node
	mu       sync.Mutex
	cur, max int
}

func (c *counting) Do(ctx context.Context, args ...any) (any, error) {
	c.mu.Lock()
	c.cur++
	c.max = max(c.max, c.cur)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cur--
		c.mu.Unlock()
	}()
	return c.Node.Do(ctx, args...)
}

// WithMaxInFlight still bounds what waits on an auto-pipelined node: with
// the node frozen and 64 goroutines obtaining, at most the bound's
// requests wait in the driver (twice the bound with the clean-ups of
// timed-out requests, which redlock admits beyond it), and each TryObtain
// returns within the node timeout and a loaded machine's margin.
func TestAutoPipeliningMaxInFlight(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
	const (
		bound       = 8
		nodeTimeout = 250 * time.Millisecond
		margin      = 2 * time.Second
	)
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	defer rc.Close()
	n := &counting{Node: goredis.New(rc)}
	c, err := redlock.NewFromNodes([]driver.Node{n}, redlock.WithMaxInFlight(bound), redlock.WithNodeTimeout(nodeTimeout), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first obtain checks the node's identity: done before the freeze.
	l, err := c.TryObtain(context.Background(), "bound-warm", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			start := time.Now()
			_, err := c.TryObtain(context.Background(), fmt.Sprintf("bound-%d", g), time.Minute)
			if err == nil {
				t.Error("obtained on a frozen node")
			}
			if took := time.Since(start); took > nodeTimeout+margin {
				t.Errorf("TryObtain took %v on a frozen node, with a node timeout of %v", took, nodeTimeout)
			}
		})
	}
	wg.Wait()
	n.mu.Lock()
	most := n.max
	n.mu.Unlock()
	t.Logf("at most %d requests waited in the driver", most)
	if most > 2*bound {
		t.Errorf("%d requests waited on the node at once, with WithMaxInFlight(%d)", most, bound)
	}
}
