package redlock

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var contendedFor = flag.Duration("contended.duration", 2*time.Second, "how long each BenchmarkContended case runs")

// BenchmarkContended has goroutines loop Obtain and Release on one lock,
// with notified waiting and, as the baseline in the same run, with polling
// only (the Client's timers, as libraries without notifications wait).
// Each case runs for -contended.duration; run them once:
//
//	go test -run '^$' -bench Contended -benchtime 1x .
//
// Metrics: acquisitions/s, handovers/s (the lock passing to another
// goroutine), waiters' time to acquire (p50, p99, p99.9 and max, in ms), and
// the least share of acquisitions any goroutine got relative to the mean.
//
// For the tail of the waits alone, run the notified cases with 64
// goroutines, each with a Client of its own, longer, and several times:
//
//	go test -run '^$' -bench 'Contended/nodes=./goroutines=64/clients=64/notify' \
//		-benchtime 1x -count 3 -contended.duration 5s .
func BenchmarkContended(b *testing.B) {
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		for _, goroutines := range []int{8, 64} {
			// One Client, four, and one per goroutine (as separate
			// processes would have: each contended Obtain subscribes).
			for _, clients := range []int{1, 4, goroutines} {
				for _, mode := range []string{"notify", "poll"} {
					name := fmt.Sprintf("nodes=%d/goroutines=%d/clients=%d/%s", nodes, goroutines, clients, mode)
					b.Run(name, func(b *testing.B) {
						opts := []Option{WithRestartGuard(GuardOff)} // fresh servers
						if mode == "poll" {
							opts = append(opts, withoutNotify())
						}
						cs := make([]*Client, clients)
						for i := range cs {
							c, err := New(cl.clients, opts...)
							if err != nil {
								b.Fatal(err)
							}
							defer c.Close()
							cs[i] = c
						}
						for b.Loop() {
							r := contend(b, cs, goroutines, *contendedFor, nil)
							secs := contendedFor.Seconds()
							b.ReportMetric(float64(r.acquisitions)/secs, "acq/s")
							b.ReportMetric(float64(r.handovers)/secs, "handovers/s")
							b.ReportMetric(r.p50.Seconds()*1000, "p50-ms")
							b.ReportMetric(r.p99.Seconds()*1000, "p99-ms")
							b.ReportMetric(r.p999.Seconds()*1000, "p99.9-ms")
							b.ReportMetric(r.max.Seconds()*1000, "max-ms")
							b.ReportMetric(r.minShare, "min-share")
						}
					})
				}
			}
		}
	}
}

type contention struct {
	acquisitions, handovers int
	p50, p99, p999, max     time.Duration
	minShare                float64 // least acquisitions of a goroutine / mean
}

// contend has goroutines loop Obtain and Release on one lock for d, each
// with the options opts(g) gives it (nil: none).
func contend(b *testing.B, cs []*Client, goroutines int, d time.Duration, handle func(c *Client, g int) Locker) contention {
	var (
		last      atomic.Int64 // goroutine that held the lock last, +1
		handovers atomic.Int64
		mu        sync.Mutex
		waits     []time.Duration
		counts    = make([]int, goroutines)
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for g := range goroutines {
		c := cs[g%len(cs)]
		h := c.Mutex("contended")
		if handle != nil {
			h = handle(c, g)
		}
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				start := time.Now()
				l, err := h.Obtain(ctx, 10*time.Second)
				if err != nil {
					break // the run is over
				}
				mine = append(mine, time.Since(start))
				counts[g]++
				if prev := last.Swap(int64(g) + 1); prev != 0 && prev != int64(g)+1 {
					handovers.Add(1)
				}
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
	r := contention{acquisitions: len(waits), handovers: int(handovers.Load())}
	if len(waits) > 0 {
		r.p50 = waits[len(waits)/2]
		r.p99 = waits[len(waits)*99/100]
		r.p999 = waits[len(waits)*999/1000]
		r.max = waits[len(waits)-1]
	}
	mean := float64(len(waits)) / float64(goroutines)
	if mean > 0 {
		r.minShare = float64(slices.Min(counts)) / mean
	}
	return r
}
