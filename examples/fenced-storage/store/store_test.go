package store

import (
	"context"
	"errors"
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
}
