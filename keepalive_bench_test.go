package redlock

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHoldManyLocks holds 100,000 locks with auto-refresh on one Client
// and one node for a few refresh periods, and reports what holding them
// costs. Run it once:
//
//	go test -run '^$' -bench HoldManyLocks -benchtime 1x .
//
// Metrics: heap bytes per held lock, goroutines while holding, refreshes
// per pipeline, and client CPU (user+system of this process) per refresh.
//
// The heap is sampled while the locks are held and refreshed: once right
// after obtaining them, and heapSamples times after the CPU is measured
// (each sample collects the garbage twice, which the CPU figure must not
// count). A sample includes the refresh batches in flight at that moment,
// a few thousand locks' worth, so samples differ by tens of bytes a lock:
// B/held-lock is their median, B/held-lock-max the largest.
func BenchmarkHoldManyLocks(b *testing.B) {
	const (
		n           = 100_000
		heapSamples = 4               // besides the one right after obtaining
		ttl         = 3 * time.Second // refreshed every second
		hold        = 5 * time.Second
	)
	cl := startNodes(b, 1)
	var pipelines, scripts atomic.Int32
	cl.clients[0].AddHook(countPipelines{&pipelines, &scripts})
	c, err := New(cl.clients, WithNodeTimeout(time.Second), WithRestartGuard(GuardOff))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	for b.Loop() {
		heapBefore := heapInUse()
		goroutinesBefore := runtime.NumGoroutine()
		locks := make([]*Lock, n)
		var wg sync.WaitGroup
		const workers = 32
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					l, err := c.TryObtain(ctx, fmt.Sprintf("hold-%d", i), ttl, WithAutoRefresh())
					if err != nil {
						errs <- err
						return
					}
					locks[i] = l
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		heapHeld := heapInUse()

		pipelines.Store(0)
		scripts.Store(0)
		cpu0 := cpuTime()
		peak := 0
		for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			peak = max(peak, runtime.NumGoroutine())
		}
		cpu := cpuTime() - cpu0
		refreshes, pipes := scripts.Load(), pipelines.Load()
		heaps := []int64{heapHeld}
		for range heapSamples {
			time.Sleep(200 * time.Millisecond)
			heaps = append(heaps, heapInUse())
		}
		slices.Sort(heaps)
		for i, l := range locks {
			if err := l.Err(); err != nil {
				b.Fatalf("lock %d lost while held: %v", i, err)
			}
		}
		b.ReportMetric(float64(heaps[len(heaps)/2]-heapBefore)/n, "B/held-lock")
		b.ReportMetric(float64(heaps[len(heaps)-1]-heapBefore)/n, "B/held-lock-max")
		b.ReportMetric(float64(peak-goroutinesBefore), "extra-goroutines")
		b.ReportMetric(float64(refreshes), "refreshes")
		b.ReportMetric(float64(refreshes)/float64(max(pipes, 1)), "refreshes/pipeline")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(refreshes, 1)), "cpu-ns/refresh")

		b.StopTimer()
		releaseAll(locks)
		b.StartTimer()
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
