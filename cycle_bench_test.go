package redlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
				// Fresh servers recover for their first window.
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				if l, err := c.Obtain(wctx, "cycle", 10*time.Second); err == nil {
					_ = l.Release(ctx)
				}
				cancel()
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
