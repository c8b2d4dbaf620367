package store

import (
	"context"
	"errors"
	"math"
	"testing"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFencedWrites(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	db := New(c, "t")
	steps := []struct {
		token int64
		value string
		stale bool
	}{
		{10, "a", false},
		{10, "b", false}, // the same holder writes again
		{12, "c", false},
		{11, "d", true}, // a holder that lost its lock
		{13, "e", false},
	}
	for _, st := range steps {
		err := db.Write(ctx, st.token, st.value)
		if got := errors.Is(err, ErrStale); got != st.stale || (!st.stale && err != nil) {
			t.Fatalf("Write(%d, %q) = %v, want stale=%v", st.token, st.value, err, st.stale)
		}
	}
	value, token, err := db.Read(ctx)
	if err != nil || value != "e" || token != 13 {
		t.Fatalf("Read = %q, %d, %v; want e, 13", value, token, err)
	}
	accepted, rejected, err := db.Stats(ctx)
	if err != nil || accepted != 4 || rejected != 1 {
		t.Fatalf("Stats = %d accepted, %d rejected, %v; want 4 and 1", accepted, rejected, err)
	}

	// A holder that read with token 20 stops an older one (token 14) from
	// writing afterwards, though no write with 20 has happened yet.
	if v, err := db.ReadFenced(ctx, 14); err != nil || v != "e" {
		t.Fatalf("ReadFenced(14) = %q, %v", v, err)
	}
	if _, err := db.ReadFenced(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, 14, "late"); !errors.Is(err, ErrStale) {
		t.Fatalf("write by the older reader after a newer read: %v, want ErrStale", err)
	}
	if _, err := db.ReadFenced(ctx, 14); !errors.Is(err, ErrStale) {
		t.Fatalf("read by an older holder: %v, want ErrStale", err)
	}
	if err := db.Write(ctx, 20, "f"); err != nil {
		t.Fatalf("write by the newer reader: %v", err)
	}

	// Readers of a read-write lock (tokens 30, 31) overlap and read in any
	// order; a writer older than them (25) is refused, a newer one (32) is
	// not; a reader older than that write is refused.
	for _, tok := range []int64{31, 30} {
		if v, err := db.ReadShared(ctx, tok); err != nil || v != "f" {
			t.Fatalf("ReadShared(%d) = %q, %v", tok, v, err)
		}
	}
	if err := db.Write(ctx, 25, "old"); !errors.Is(err, ErrStale) {
		t.Fatalf("write older than the readers: %v, want ErrStale", err)
	}
	if _, err := db.ReadFenced(ctx, 30); !errors.Is(err, ErrStale) {
		t.Fatalf("fenced read older than a reader: %v, want ErrStale", err)
	}
	if err := db.Write(ctx, 32, "g"); err != nil {
		t.Fatalf("write after the readers: %v", err)
	}
	if _, err := db.ReadShared(ctx, 31); !errors.Is(err, ErrStale) {
		t.Fatalf("read older than a write: %v, want ErrStale", err)
	}
}

// TestDegradedTokensExact: two degraded-mode tokens one lease version
// apart are one double apart from nothing (−2⁶³ + v): compared as Lua
// numbers they are equal, and the older holder's write was accepted.
func TestDegradedTokensExact(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	db := New(c, "d")
	base := int64(math.MinInt64) + 1_800_000_000_000_000
	if err := db.Write(ctx, base+1, "newer"); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, base, "older"); !errors.Is(err, ErrStale) {
		t.Fatalf("older degraded token: %v, want ErrStale", err)
	}
}
