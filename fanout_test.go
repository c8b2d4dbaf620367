package redlock

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of the bounded parallel fan-out (fanout.go).

func TestFanOutBound(t *testing.T) {
	const n = 3 * fanOutLimit
	var running, peak atomic.Int32
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	errs := fanOut(items, func(i int) error {
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		if i%2 == 1 {
			return fmt.Errorf("odd %d", i)
		}
		return nil
	})
	for i, err := range errs {
		if want := i%2 == 1; (err != nil) != want || (want && err.Error() != fmt.Sprintf("odd %d", i)) {
			t.Fatalf("call %d: error %v, want its own", i, err)
		}
	}
	if p := peak.Load(); p > fanOutLimit {
		t.Fatalf("%d calls at once, want at most %d", p, fanOutLimit)
	}
	if errs := fanOut(nil, func(int) error { t.Fatal("called for no item"); return nil }); len(errs) != 0 {
		t.Fatalf("%d errors of no item", len(errs))
	}
}
