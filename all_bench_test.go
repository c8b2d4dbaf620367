package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAll is one uncontended Obtain and Release of Client.All of two names
// on one node, with the restart guard off and on (the default), beside
// BenchmarkCycle's single-name cycle:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench '^Benchmark(Cycle|All)$' -count 1 . ; done | tee multi.txt
//	benchstat -col /mode multi.txt
func BenchmarkAll(b *testing.B) {
	cl := startNodes(b, 1)
	ctx := context.Background()
	names := []string{"cycle-a", "cycle-b"}
	for _, mode := range []string{"guard-off", "guard-on"} {
		b.Run(fmt.Sprintf("names=2/nodes=1/mode=%s", mode), func(b *testing.B) {
			opts := []Option{WithNodeTimeout(time.Second), WithRestartGuard(GuardOff)}
			if mode == "guard-on" {
				opts = []Option{WithNodeTimeout(time.Second), WithMaxTTL(10 * time.Second)}
			}
			c, err := New(cl.clients, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			waitOutRecovery(b, c, time.Minute, 10*time.Second)
			b.ReportAllocs()
			for b.Loop() {
				m, err := c.All(names...).Obtain(ctx, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
