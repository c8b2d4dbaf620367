package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// kindHandles make a handle of each kind of lock, for benchmarks.
var kindHandles = []struct {
	kind   string
	handle func(c *Client, name string) Locker
}{
	{"plain", (*Client).Mutex},
	{"reentrant", func(c *Client, name string) Locker { return c.Reentrant(name, "bench") }},
	{"write", writer},
	{"read", reader},
}

// BenchmarkFamilyCycle is one uncontended obtain-release cycle of each kind
// of lock (docs/lock-family.md), restart guard on, on 1 and 5 nodes; the
// plain lock is the baseline of the same run:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench FamilyCycle -count 1 . ; done | tee family.txt
//	benchstat -col /kind family.txt
func BenchmarkFamilyCycle(b *testing.B) {
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		ctx := context.Background()
		c, err := New(cl.clients, WithNodeTimeout(time.Second), WithMaxTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		waitOutRecovery(b, c, time.Minute, 10*time.Second)
		for _, k := range kindHandles {
			b.Run(fmt.Sprintf("nodes=%d/kind=%s", nodes, k.kind), func(b *testing.B) {
				h := k.handle(c, "cycle-"+k.kind)
				b.ReportAllocs()
				for b.Loop() {
					l, err := h.TryObtain(ctx, 10*time.Second)
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

// BenchmarkFamilyContended has 8 goroutines, each with a Client of its
// own, loop Obtain and Release on one name for -contended.duration: all
// writers (WithExclusive), against plain locks in the same run, and a read-
// mostly mix (one writer in four goroutines, the rest readers). Run once:
//
//	go test -run '^$' -bench FamilyContended -benchtime 1x .
func BenchmarkFamilyContended(b *testing.B) {
	mixes := []struct {
		name   string
		handle func(c *Client, g int) Locker
	}{
		{"plain", nil},
		{"writers", func(c *Client, _ int) Locker { return writer(c, "contended") }},
		{"readers+writers", func(c *Client, g int) Locker {
			if g%4 == 0 {
				return writer(c, "contended")
			}
			return reader(c, "contended")
		}},
	}
	for _, nodes := range []int{1, 5} {
		cl := startNodes(b, nodes)
		for _, mix := range mixes {
			b.Run(fmt.Sprintf("nodes=%d/goroutines=8/%s", nodes, mix.name), func(b *testing.B) {
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
					r := contend(b, cs, len(cs), *contendedFor, mix.handle)
					secs := contendedFor.Seconds()
					b.ReportMetric(float64(r.acquisitions)/secs, "acq/s")
					b.ReportMetric(float64(r.handovers)/secs, "handovers/s")
					b.ReportMetric(r.p50.Seconds()*1000, "p50-ms")
					b.ReportMetric(r.p99.Seconds()*1000, "p99-ms")
					b.ReportMetric(r.minShare, "min-share")
				}
			})
		}
	}
}
