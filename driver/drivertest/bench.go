package drivertest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Benchmark measures a driver's cost per request on one redis-server:
// Do (a GET of a missing key), Pipe (three commands), and the plain
// lock's cycle through a redlock Client (TryObtain and Release), serially
// and from 64 goroutines. Its allocations per operation are the driver's
// and the engine's; its speed depends on the machine, and only a
// comparison within one run means anything.
func Benchmark(b *testing.B, d Driver) {
	s := redistest.Start(b, 1)[0]
	n := d.Standalone(b, s.Addr())
	ctx := context.Background()
	b.Run("Do", func(b *testing.B) {
		key := unique("bench-missing")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n.Do(ctx, "GET", key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Pipe", func(b *testing.B) {
		key := unique("bench-pipe")
		cmds := [][]any{{"SET", key, "v", "PX", 60000}, {"PTTL", key}, {"GET", key}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n.Pipe(ctx, cmds); err != nil {
				b.Fatal(err)
			}
		}
	})
	c, err := redlock.NewFromNodes([]driver.Node{n}, redlock.WithNodeTimeout(time.Second), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	b.Run("Cycle", func(b *testing.B) {
		name := unique("bench-cycle")
		b.ReportAllocs()
		for b.Loop() {
			l, err := c.TryObtain(ctx, name, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Cycle64", func(b *testing.B) {
		var id atomic.Int64
		base := unique("bench-cycle64")
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			name := fmt.Sprintf("%s-%d", base, id.Add(1))
			for pb.Next() {
				l, err := c.TryObtain(ctx, name, 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
