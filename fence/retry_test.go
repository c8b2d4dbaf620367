package fence

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRedisAddRetried: the reply to an Add is lost after Redis applied it
// (a proxy drops the replies); go-redis, with its default settings,
// retries a command whose reply timed out. The retry must not apply the
// change a second time: a stock of 10 decremented once is 9, and the call
// returns 9.
func TestRedisAddRetried(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	direct := srv.Client()
	t.Cleanup(func() { _ = direct.Close() })
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// The defaults but for a read timeout of 1 s instead of 3 s; MaxRetries
	// is go-redis's default, 3.
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	r := NewRedis(c)
	ctx := context.Background()
	if _, err := r.Add(ctx, "stock", 1, 10, NoFloor); err != nil {
		t.Fatal(err)
	}

	p.SetDropReplies(true)
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.Add(ctx, "stock", 2, -1, 0)
		done <- result{n, err}
	}()
	// Once Redis has applied the first attempt, let the replies through
	// again, long before the client's read times out and it retries.
	deadline := time.Now().Add(30 * time.Second)
	for direct.HGet(ctx, "stock", "value").Val() == "10" {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt never reached Redis")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Heal()
	res := <-done
	if res.err != nil || res.n != 9 {
		t.Errorf("Add(-1) with its reply lost once = %d, %v; want 9", res.n, res.err)
	}
	s, err := r.Inspect(ctx, "stock")
	if err != nil || s.Value != "9" || s.Writes != 2 {
		t.Errorf("stock %q after %d writes (%v); want 9 after 2", s.Value, s.Writes, err)
	}
}
