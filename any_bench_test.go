package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAny is one sale under a segmented lock: 32 goroutines of
// one Client (SetParallelism on two cores) each take a segment of segments
// names with Client.Any, hold it 200 µs (the sale's read-modify-write), and
// release it. segments=1 is one lock for the whole stock. ns/op is the
// time per sale of the whole group; "uncontended" is one goroutine's
// Obtain-Release cycle of Client.Any over 8 free segments, beside BenchmarkCycle:
//
//	go test -run '^$' -bench '^BenchmarkAny$' -benchtime 2s -count 3 .
func BenchmarkAny(b *testing.B) {
	cl := startNodes(b, 1)
	ctx := context.Background()
	newC := func(b *testing.B) *Client {
		c, err := New(cl.clients, WithNodeTimeout(time.Second), WithRestartGuard(GuardOff))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	b.Run("uncontended/segments=8/nodes=1", func(b *testing.B) {
		c := newC(b)
		names := segmentNames("bench-free", 8)
		b.ReportAllocs()
		for b.Loop() {
			l, err := c.Any(names...).Obtain(ctx, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, segments := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("contended/segments=%d/goroutines=32/nodes=1", segments), func(b *testing.B) {
			c := newC(b)
			names := segmentNames(fmt.Sprintf("bench-hot-%d", segments), segments)
			b.SetParallelism(16)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := c.Any(names...).Obtain(ctx, 10*time.Second)
					if err != nil {
						b.Error(err)
						return
					}
					time.Sleep(200 * time.Microsecond)
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
