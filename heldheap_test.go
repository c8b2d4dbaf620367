package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHeapPerHeldLock bounds what a held lock keeps on the heap (its Lock,
// keys and secret; no auto-refresh), measured exactly as the heap in use
// before and after obtaining them: 480 B at 759f657, where a fencing
// counter key kept per lock had made it 560 (issue 50: no regression in
// the heap per held lock). BenchmarkHoldManyLocks measures the whole of
// holding, refreshes included.
func TestHeapPerHeldLock(t *testing.T) {
	const (
		n     = 5000
		bound = 520 // bytes per held lock
	)
	cl := startNodes(t, 1)
	c, err := New(cl.clients, WithNodeTimeout(5*time.Second), WithRestartGuard(GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	// The first obtain builds the Client's state for its nodes (their
	// identities, the recorder): not any held lock's.
	first, err := c.TryObtain(ctx, "held-first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	locks := make([]*Lock, n)
	before := heapInUse()
	for i := range locks {
		if locks[i], err = c.TryObtain(ctx, fmt.Sprintf("held-%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(heapInUse()-before) / n
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%.1f B per held lock", per)
	if per > bound {
		t.Errorf("a held lock keeps %.1f B of heap, more than %d", per, bound)
	}
}
