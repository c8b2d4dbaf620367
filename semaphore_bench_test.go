package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkPermitCycle is one uncontended TryObtainPermit-Release cycle of
// a semaphore of k permits, restart guard on, on 1 and 5 nodes; the plain
// lock's cycle is the baseline of the same run (docs/benchmarks.md):
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench PermitCycle -benchtime 2000x -count 1 . ; done | tee permit.txt
//	benchstat -col /kind permit.txt
func BenchmarkPermitCycle(b *testing.B) {
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		ctx := context.Background()
		c, err := New(cl.clients, WithNodeTimeout(time.Second), WithMaxTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		waitOutRecovery(b, c, time.Minute, 10*time.Second)
		for _, k := range []int{0, 1, 2, 5} {
			kind := "plain"
			if k > 0 {
				kind = fmt.Sprintf("permit-of-%d", k)
			}
			b.Run(fmt.Sprintf("nodes=%d/kind=%s", nodes, kind), func(b *testing.B) {
				name := "cycle-" + kind
				b.ReportAllocs()
				for b.Loop() {
					var l *Lock
					var err error
					if k == 0 {
						l, err = c.TryObtain(ctx, name, 10*time.Second)
					} else {
						l, err = c.Semaphore(name, k).TryObtain(ctx, 10*time.Second)
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		_ = c.Close()
	}
}

// BenchmarkPermitContended has 8 goroutines, each with a Client of its
// own, loop ObtainPermit and Release on one semaphore of k permits for
// -contended.duration, against a plain lock (k = 1 of a lock) in the same
// run. Run once:
//
//	go test -run '^$' -bench PermitContended -benchtime 1x .
func BenchmarkPermitContended(b *testing.B) {
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		for _, k := range []int{0, 1, 2, 4} {
			kind := "plain"
			if k > 0 {
				kind = fmt.Sprintf("permits=%d", k)
			}
			b.Run(fmt.Sprintf("nodes=%d/goroutines=8/%s", nodes, kind), func(b *testing.B) {
				cs := make([]*Client, 8)
				for i := range cs {
					c, err := New(cl.clients, WithRestartGuard(GuardOff)) // fresh servers
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cs[i] = c
				}
				for b.Loop() {
					n, p50, p99 := contendPermits(b, cs, "contended-"+kind, k, *contendedFor)
					secs := contendedFor.Seconds()
					b.ReportMetric(float64(n)/secs, "acq/s")
					b.ReportMetric(p50.Seconds()*1000, "p50-ms")
					b.ReportMetric(p99.Seconds()*1000, "p99-ms")
				}
			})
		}
	}
}

// contendPermits runs one goroutine per Client, each obtaining and
// releasing a permit of k of semaphore name (k = 0: the plain lock) until d
// has passed, and
// returns the acquisitions and the median and 99th percentile obtain time.
func contendPermits(b *testing.B, cs []*Client, name string, k int, d time.Duration) (n int, p50, p99 time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
	)
	for _, c := range cs {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				start := time.Now()
				var l *Lock
				var err error
				if k == 0 {
					l, err = c.Obtain(ctx, name, 10*time.Second)
				} else {
					l, err = c.Semaphore(name, k).Obtain(ctx, 10*time.Second)
				}
				if err != nil {
					break // the run is over
				}
				mine = append(mine, time.Since(start))
				if err := l.Release(context.Background()); err != nil {
					b.Errorf("release: %v", err)
					break
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(waits)
	if len(waits) == 0 {
		return 0, 0, 0
	}
	return len(waits), waits[len(waits)/2], waits[len(waits)*99/100]
}
