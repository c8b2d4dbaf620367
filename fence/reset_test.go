package fence

import (
	"context"
	"errors"
	"math"
	"testing"
)

// TestRedisReset: a fence poisoned by a token no holder has (issue 46,
// finding 2's 2^63-1, here through a shared read as well) refuses every
// real holder until Reset lowers it; reset to the lock's latest token, a
// stale holder stays refused; reset to nothing, the next sequencer of any
// lock is admitted and bound.
func TestRedisReset(t *testing.T) {
	r, _ := newRedis(t)
	ctx := context.Background()
	seq := func(lock string, tok int64) Sequencer { return Sequencer{Lock: lock, Kind: "plain", Token: tok} }
	if err := r.Set(ctx, "acct", seq("a", 9), "v9"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.GetShared(ctx, "acct", Sequencer{Lock: "a", Kind: "read", Token: math.MaxInt64}); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "acct", seq("a", 10), "v10"); !errors.Is(err, ErrStale) {
		t.Fatalf("a real holder on a poisoned fence: %v, want ErrStale", err)
	}
	if err := r.Reset(ctx, "acct", seq("a", 10)); err != nil {
		t.Fatal(err)
	}
	st, err := r.Inspect(ctx, "acct")
	if err != nil || st.Fence != 10 || st.Shared != 0 || st.Lock != "a" || st.Value != "v9" {
		t.Fatalf("after Reset: %+v, %v", st, err)
	}
	if err := r.Set(ctx, "acct", seq("a", 9), "stale"); !errors.Is(err, ErrStale) {
		t.Errorf("the stale holder after the reset: %v, want ErrStale", err)
	}
	if err := r.Set(ctx, "acct", seq("a", 10), "v10"); err != nil {
		t.Errorf("the holder of the reset's token: %v", err)
	}
	if err := r.Reset(ctx, "acct", Sequencer{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "acct", seq("b", 3), "b3"); err != nil {
		t.Errorf("after a reset to nothing, another lock's sequencer: %v", err)
	}
	if st, _ := r.Inspect(ctx, "acct"); st.Lock != "b" || st.Fence != 3 {
		t.Errorf("after a reset to nothing and a write: %+v", st)
	}
	if err := r.Reset(ctx, "", seq("a", 1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Reset of an empty key: %v", err)
	}
}

// TestGuardStoreReset: a Guard whose store is a *Redis or a MemoryStore,
// poisoned by a forged header's token in the plain mode, is reset, and the
// real holder is admitted again.
func TestGuardStoreReset(t *testing.T) {
	r, _ := newRedis(t)
	mem := &MemoryStore{}
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	holder := Sequencer{Lock: "reports", Kind: "plain", Token: 10}
	forged := Sequencer{Lock: "reports", Kind: "plain", Token: math.MaxInt64}
	for name, tc := range map[string]struct {
		store GuardStore
		reset func(Sequencer)
	}{
		"redis":  {r, func(s Sequencer) { _ = r.Reset(ctx, "/reports/q3", s) }},
		"memory": {mem, func(s Sequencer) { mem.Reset("/reports/q3", s) }},
	} {
		g := NewGuard(tc.store)
		if err := g.Do(ctx, "/reports/q3", forged, noop); err != nil {
			t.Fatalf("%s: the forged token in the plain mode: %v", name, err)
		}
		if err := g.Do(ctx, "/reports/q3", holder, noop); !errors.Is(err, ErrStale) {
			t.Fatalf("%s: the holder on the poisoned fence: %v, want ErrStale", name, err)
		}
		if err := g.Do(ctx, "/reports/q3", Sequencer{Lock: "other", Kind: "plain", Token: 5}, noop); !errors.Is(err, ErrOtherLock) {
			t.Fatalf("%s: another lock: %v, want ErrOtherLock", name, err)
		}
		tc.reset(holder)
		if err := g.Do(ctx, "/reports/q3", holder, noop); err != nil {
			t.Errorf("%s: the holder after the reset: %v", name, err)
		}
		if err := g.Do(ctx, "/reports/q3", Sequencer{Lock: "reports", Kind: "plain", Token: 9}, noop); !errors.Is(err, ErrStale) {
			t.Errorf("%s: a stale holder after the reset: %v, want ErrStale", name, err)
		}
	}
}
