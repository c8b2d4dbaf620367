package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one case of one pass: one contender in one scenario.
type result struct {
	Scenario  string `json:"scenario"`
	Contender string `json:"contender"`
	// Config is the contender's configuration (contender.config).
	Config    string  `json:"config,omitempty"`
	Pass      int     `json:"pass"`
	Cycles    uint64  `json:"cycles"` // lock+unlock cycles, or acquisitions when contended
	Errors    uint64  `json:"errors"` // failed attempts (not counted as cycles)
	Handovers uint64  `json:"handovers"`
	Seconds   float64 `json:"seconds"`
	// Latencies in microseconds: of a whole cycle, or of a waiter's time
	// to acquire when contended.
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	MeanUs float64 `json:"mean_us"`
	Allocs float64 `json:"allocs_per_cycle"`
	Bytes  float64 `json:"bytes_per_cycle"`
	CPUus  float64 `json:"cpu_us_per_cycle"` // client user+system CPU
	// SrvCPUus is the redis-server processes' user+system CPU per cycle
	// (from /proc, 10 ms ticks).
	SrvCPUus float64 `json:"server_cpu_us_per_cycle"`
	MinShare float64 `json:"min_share,omitempty"`
	FirstErr string  `json:"first_error,omitempty"`
}

func (r result) rate() float64 {
	if r.Seconds == 0 {
		return 0
	}
	return float64(r.Cycles) / r.Seconds
}

// limits bound one case: it stops at the deadline or after max cycles
// (0: no bound).
type limits struct {
	d   time.Duration
	max uint64
}

// errorPause is how long a goroutine of an uncontended case pauses after a
// failed attempt before the next, as a caller would: without it, a
// contender that fails fast (a node skipped after timeouts) spins and
// starves the machine, and the case measures the spin.
var errorPause = 10 * time.Millisecond

type meter struct {
	ms0, ms1   runtime.MemStats
	cpu0, srv0 time.Duration
	t0         time.Time
}

// serverPids are the redis-server processes whose CPU is counted.
var serverPids []int

// serverCPU is the user+system CPU time used so far by the servers.
func serverCPU() time.Duration {
	var total time.Duration
	for _, pid := range serverPids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * time.Second / clockTicks
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func (m *meter) start() {
	runtime.GC()
	runtime.ReadMemStats(&m.ms0)
	m.cpu0 = cpuTime()
	m.srv0 = serverCPU()
	m.t0 = time.Now()
}

// stop fills r's rate, allocation and CPU figures from the cycles counted.
func (m *meter) stop(r *result, elapsed time.Duration) {
	cpu := cpuTime() - m.cpu0
	srv := serverCPU() - m.srv0
	runtime.ReadMemStats(&m.ms1)
	r.Seconds = elapsed.Seconds()
	if r.Cycles > 0 {
		n := float64(r.Cycles)
		r.Allocs = float64(m.ms1.Mallocs-m.ms0.Mallocs) / n
		r.Bytes = float64(m.ms1.TotalAlloc-m.ms0.TotalAlloc) / n
		r.CPUus = float64(cpu.Microseconds()) / n
		r.SrvCPUus = float64(srv.Microseconds()) / n
	}
}

func fill(r *result, h *hist) {
	r.P50us = float64(h.quantile(0.50).Nanoseconds()) / 1e3
	r.P99us = float64(h.quantile(0.99).Nanoseconds()) / 1e3
	r.MeanUs = float64(h.mean().Nanoseconds()) / 1e3
}

// runCycles has goroutines (one key each) loop TryLock and Unlock: the
// uncontended cycle. With one goroutine it is the serial case.
func runCycles(workers []worker, lim limits) result {
	hs := make([]hist, len(workers))
	var cycles, errs atomic.Uint64
	var firstErr atomic.Pointer[error]
	var m meter
	var wg sync.WaitGroup
	m.start()
	deadline := m.t0.Add(lim.d)
	ctx := context.Background()
	for i, w := range workers {
		h := &hs[i]
		wg.Go(func() {
			for {
				now := time.Now()
				if now.After(deadline) {
					return
				}
				if lim.max > 0 && cycles.Load()+errs.Load() >= lim.max {
					return
				}
				err := w.TryLock(ctx)
				if err == nil {
					err = w.Unlock(ctx)
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					time.Sleep(errorPause)
					continue
				}
				h.record(time.Since(now))
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(m.t0)
	r := result{Cycles: cycles.Load(), Errors: errs.Load()}
	if e := firstErr.Load(); e != nil {
		r.FirstErr = (*e).Error()
	}
	m.stop(&r, elapsed)
	for i := 1; i < len(hs); i++ {
		hs[0].merge(&hs[i])
	}
	fill(&r, &hs[0])
	return r
}

// runContended has goroutines (one key for all) loop Lock and Unlock. A
// waiter whose Lock gives up before the end tries again; its wait counts
// from its first attempt.
func runContended(workers []worker, d time.Duration) result {
	hs := make([]hist, len(workers))
	counts := make([]uint64, len(workers))
	var last, handovers, errs atomic.Uint64
	var m meter
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	m.start()
	stop := time.AfterFunc(d, cancel)
	defer stop.Stop()
	for i, w := range workers {
		h := &hs[i]
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				for {
					err := w.Lock(ctx)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
				}
				h.record(time.Since(start))
				counts[i]++
				if prev := last.Swap(uint64(i) + 1); prev != 0 && prev != uint64(i)+1 {
					handovers.Add(1)
				}
				if err := w.Unlock(context.Background()); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := result{Handovers: handovers.Load(), Errors: errs.Load()}
	var total uint64
	for _, c := range counts {
		total += c
	}
	r.Cycles = total
	m.stop(&r, d)
	for i := 1; i < len(hs); i++ {
		hs[0].merge(&hs[i])
	}
	fill(&r, &hs[0])
	if total > 0 {
		least := counts[0]
		for _, c := range counts {
			least = min(least, c)
		}
		r.MinShare = float64(least) / (float64(total) / float64(len(counts)))
	}
	return r
}
