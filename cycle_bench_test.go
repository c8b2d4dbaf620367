package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/script"
)

// BenchmarkCycle is one uncontended obtain-release cycle on one lock, on 1
// and 5 nodes: a raw floor (SET NX PX and a compare-and-delete script, no
// library, a fan-out that returns at quorum), this library with the restart
// guard off, and with it on (the default). Fencing is part of every cycle of
// the library. Run the three in one pass, several passes:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench Cycle -count 1 . ; done | tee cycle.txt
//	benchstat -col /mode cycle.txt
func BenchmarkCycle(b *testing.B) {
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		ctx := context.Background()
		b.Run(fmt.Sprintf("nodes=%d/mode=raw", nodes), func(b *testing.B) {
			del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
			b.ReportAllocs()
			for b.Loop() {
				v := newValue()
				rawQuorum(ctx, cl.clients, func(n redis.UniversalClient) bool {
					return n.SetNX(ctx, "{raw:cycle}", v, 10*time.Second).Val()
				})
				rawQuorum(ctx, cl.clients, func(n redis.UniversalClient) bool {
					return del.Run(ctx, n, []string{"{raw:cycle}"}, v).Err() == nil
				})
			}
		})
		// go-redis's default options: ContextTimeoutEnabled false, which
		// most services run.
		var plainClients []redis.UniversalClient
		for _, s := range cl.servers {
			pc := redis.NewClient(&redis.Options{Addr: s.Addr()})
			b.Cleanup(func() { _ = pc.Close() })
			plainClients = append(plainClients, pc)
		}
		for _, mode := range []string{"guard-off", "guard-on", "go-redis-defaults"} {
			b.Run(fmt.Sprintf("nodes=%d/mode=%s", nodes, mode), func(b *testing.B) {
				clients := cl.clients
				opts := []Option{WithNodeTimeout(time.Second), WithRestartGuard(GuardOff)}
				switch mode {
				case "guard-on":
					opts = []Option{WithNodeTimeout(time.Second), WithMaxTTL(10 * time.Second)}
				case "go-redis-defaults":
					clients = plainClients
					opts = []Option{WithNodeTimeout(time.Second), WithMaxTTL(10 * time.Second)}
				}
				c, err := New(clients, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				waitOutRecovery(b, c, time.Minute, 10*time.Second)
				b.ReportAllocs()
				for b.Loop() {
					l, err := c.TryObtain(ctx, "cycle", 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// rawQuorum sends op to every node in parallel and returns once a quorum
// said yes or every node answered: the floor of a Redlock round.
func rawQuorum(ctx context.Context, nodes []redis.UniversalClient, op func(redis.UniversalClient) bool) {
	if len(nodes) == 1 {
		op(nodes[0])
		return
	}
	yes := make(chan bool, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { yes <- op(n) })
	}
	need, got := len(nodes)/2+1, 0
	for range nodes {
		if <-yes {
			got++
			if got == need {
				break
			}
		}
	}
	wg.Wait() // stay bounded: the late replies are in before the next round
}

// BenchmarkFirstObtain is a new Client's first obtain-release cycle beside
// its second, on 5 nodes, with the defaults (the restart guard, fencing
// and the configuration records on): the first also makes the Client's
// first contact (identity.go: each node's identity and run_id) and its
// first configuration record (joint.go). conns=warm gives the new Client
// go-redis clients that are already connected, as a service that makes a
// Client beside others does; conns=cold new ones, whose first requests
// dial. It reports each cycle's mean as first-ns and second-ns, and their
// ratio:
//
//	go test -run '^$' -bench FirstObtain -count 5 . | tee first.txt
func BenchmarkFirstObtain(b *testing.B) {
	const nodes = 5
	cl := startNodes(b, nodes)
	ctx := context.Background()
	opts := []Option{WithNodeTimeout(time.Second), WithMaxTTL(10 * time.Second)}
	w, err := New(cl.clients, opts...)
	if err != nil {
		b.Fatal(err)
	}
	waitOutRecovery(b, w, time.Minute, 10*time.Second)
	_ = w.Close()
	cycle := func(c *Client) time.Duration {
		t0 := time.Now()
		l, err := c.TryObtain(ctx, "first", 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for _, run := range []struct {
		conns   string
		records bool
	}{{"warm", true}, {"cold", true}, {"warm", false}} {
		conns := run.conns
		b.Run(fmt.Sprintf("conns=%s/records=%v", conns, run.records), func(b *testing.B) {
			var first, second time.Duration
			n := 0
			for b.Loop() {
				clients := cl.clients
				if conns == "cold" {
					clients = nil
					for _, s := range cl.servers {
						clients = append(clients, redis.NewClient(&redis.Options{Addr: s.Addr()}))
					}
				}
				c, err := New(clients, append(opts, WithConfigRecords(run.records))...)
				if err != nil {
					b.Fatal(err)
				}
				first += cycle(c)
				second += cycle(c)
				n++
				_ = c.Close()
				if conns == "cold" {
					for _, rc := range clients {
						_ = rc.Close()
					}
				}
			}
			b.ReportMetric(float64(first.Nanoseconds())/float64(n), "first-ns")
			b.ReportMetric(float64(second.Nanoseconds())/float64(n), "second-ns")
			b.ReportMetric(float64(first)/float64(second), "first/second")
		})
	}
}

// BenchmarkNewNames is the cycle on 5 nodes where every obtain locks a
// name of its own, as a service that locks one name per entity
// (payment:<id>) does, beside one name reused. A new name's counters are
// seeded from each node's clock rounded down to the second (token.lua's
// seed), and the token is safe in one round only when a quorum of the
// first round's votes are equal (docs/fencing.md): else the second round
// raises them (fence.lua). With names=new-apart each node's counter of the
// name is set to a value of its own beforehand (untimed), as seeds read in
// different seconds are (clocks a second apart, or a second's edge between
// the nodes' reads); the nodes here share one clock. second-rounds/op is
// the share of obtains that needed the second round
// (AttemptEvent.SecondRound).
//
//	go test -run '^$' -bench NewNames -count 3 .
func BenchmarkNewNames(b *testing.B) {
	cl := startNodes(b, 5)
	ctx := context.Background()
	var seconds atomic.Int64
	hook := hookFunc(func(e Event) {
		if a, ok := e.(AttemptEvent); ok && a.SecondRound {
			seconds.Add(1)
		}
	})
	c, err := New(cl.clients, WithNodeTimeout(time.Second), WithMaxTTL(10*time.Second), WithHook(hook))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	waitOutRecovery(b, c, time.Minute, 10*time.Second)
	layout := keys.Layout{Prefix: limits.Prefix}
	for _, names := range []string{"reused", "new", "new-apart"} {
		b.Run("names="+names, func(b *testing.B) {
			seconds.Store(0)
			n := 0
			run := time.Now().UnixNano() // names of no earlier run
			name := func(i int) string {
				if names == "reused" {
					return "reused"
				}
				return fmt.Sprintf("%s-%d-%d", names, run, i)
			}
			if names == "new-apart" {
				// b.N is known before the loop: set every name's counters
				// apart, one node's a second's seed above the previous
				// one's, an hour ahead of the nodes' clocks.
				base := time.Now().Add(time.Hour).UnixMilli() * 1024
				for i := range b.N {
					k, err := layout.Lock(name(i))
					if err != nil {
						b.Fatal(err)
					}
					for j, node := range cl.clients {
						if err := node.Set(ctx, keys.Fence(k), base+int64(j)*script.Seed(1000), time.Hour).Err(); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ResetTimer()
			}
			for i := range b.N {
				l, err := c.TryObtain(ctx, name(i), 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(seconds.Load())/float64(n), "second-rounds/op")
		})
	}
}
