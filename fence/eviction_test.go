package fence

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRedisEviction: a Redis full of data evicts under an allkeys-*
// policy, and a fence record is a key like any other: once it is evicted,
// a stale token is accepted, as after a DEL. Under noeviction (Redis's
// default) or a volatile-* policy (the record has no expiry), the record
// stays: writes fail with OOM instead, and the stale token is refused
// still. Nothing in the package can change this; docs/fencing.md,
// "Eviction", says which policy a fence's Redis needs.
func TestRedisEviction(t *testing.T) {
	ctx := context.Background()
	filler := strings.Repeat("x", 4096)
	for _, tc := range []struct {
		policy string
		kept   bool
	}{
		{"allkeys-lru", false},
		{"noeviction", true},
		{"volatile-lru", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			c := redistest.Start(t, 1, redistest.Options{Args: []string{"--maxmemory-policy", tc.policy}})[0].Client()
			t.Cleanup(func() { _ = c.Close() })
			r := NewRedis(c)
			if err := r.Set(ctx, "account:7", Token(10), "balance=90"); err != nil {
				t.Fatal(err)
			}
			for i := range 100 { // data with an expiry, which volatile-* may evict
				c.Set(ctx, "session:"+strconv.Itoa(i), filler, time.Hour)
			}
			redistest.MaxMemoryAtUsed(t, c)
			// Write until the record is gone or Redis refuses the writes.
			var err error
			for i := 0; i < 10000 && err == nil; i++ {
				err = c.Set(ctx, "cache:"+strconv.Itoa(i), filler, 0).Err()
				if n, _ := c.Exists(ctx, "account:7").Result(); n == 0 {
					break
				}
			}
			if err != nil && !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatal(err)
			}
			if n, _ := c.Exists(ctx, "account:7").Result(); (n == 1) != tc.kept {
				t.Fatalf("record kept: %v, want %v", n == 1, tc.kept)
			}
			stale := r.Set(ctx, "account:7", Token(9), "balance=150")
			switch {
			case tc.kept && stale == nil:
				t.Fatal("the stale token was accepted though the record was kept")
			case tc.kept && !errors.Is(stale, ErrStale) && !strings.HasPrefix(stale.Error(), "OOM"):
				t.Fatalf("stale token: %v, want ErrStale or OOM", stale)
			case !tc.kept && stale != nil:
				t.Fatalf("stale token after the record's eviction: %v; the control expects it accepted", stale)
			}
		})
	}
}
