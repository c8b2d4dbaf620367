package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// firstWrite records when its first byte was written: when the command
// that run started first printed.
type firstWrite struct {
	mu sync.Mutex
	at time.Time
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() {
		w.at = time.Now()
	}
	return len(p), nil
}

func (w *firstWrite) when() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// BenchmarkRunFrozenNode measures what one frozen node (SIGSTOP) of five
// costs a "redlock run --timeout 20s NAME -- sh -c 'echo started'", run
// in this process: the time to the command's first output (start-ms), and
// from the command's end to run's (after-ms), the median of b.N runs,
// beside the same with every node healthy (docs/benchmarks.md, issue 49).
func BenchmarkRunFrozenNode(b *testing.B) {
	for _, frozen := range []bool{false, true} {
		name := "healthy"
		if frozen {
			name = "one-of-five-frozen"
		}
		b.Run(name, func(b *testing.B) {
			servers := redistest.Start(b, 5)
			if frozen {
				if err := servers[4].Pause(); err != nil {
					b.Fatal(err)
				}
			}
			args := []string{"run", "--nodes", nodesFlag(servers...), noGuard, wait, "--timeout", "20s", "bench-frozen", "--", "sh", "-c", "echo started"}
			var starts, afters []time.Duration
			b.ResetTimer()
			for range b.N {
				var out firstWrite
				var errb syncBuffer
				t0 := time.Now()
				if code := run(context.Background(), args, &out, &errb); code != 0 {
					b.Fatalf("exit %d: %s", code, errb.String())
				}
				end := time.Now()
				starts = append(starts, out.when().Sub(t0))
				afters = append(afters, end.Sub(out.when()))
			}
			b.ReportMetric(ms(median(starts)), "start-ms")
			b.ReportMetric(ms(median(afters)), "after-ms")
		})
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
