package fence_test

import (
	"context"
	"crypto/hmac"
	"strconv"
	"testing"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The cost of a checked write: a Guard admits a sequencer and runs the
// write (an HSET on a local redis-server), in its plain mode, in the
// Checked mode (Client.Check on three local lock nodes first, while the
// guard holds the resource), and with the Signed mode's work (the
// holder's signature and the guard's, compared) before a plain admission.
// docs/benchmarks.md has the numbers.
func BenchmarkCheckedWrite(b *testing.B) {
	c, l := lockOnNodesB(b, "bench")
	store := redistest.Start(b, 1)[0].Client()
	b.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	s := l.Sequencer()
	key := []byte("0123456789abcdef0123456789abcdef")
	write := func(i int) func(context.Context) error {
		return func(ctx context.Context) error { return store.HSet(ctx, "bench:res", "value", i).Err() }
	}
	modes := []struct {
		name string
		g    *fence.Guard
		sign bool
	}{
		{"plain", fence.NewGuard(&fence.MemoryStore{}), false},
		{"checked", fence.NewGuard(&fence.MemoryStore{}, fence.Checked(c)), false},
		{"signed", fence.NewGuard(&fence.MemoryStore{}), true},
	}
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			for i := range b.N {
				if m.sign {
					sig := fence.Sign(key, s) // the holder's
					if !hmac.Equal([]byte(sig), []byte(fence.Sign(key, s))) {
						b.Fatal("signatures differ")
					}
				}
				if err := m.g.Do(ctx, "/bench/"+strconv.Itoa(i%16), s, write(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
