package fence

import (
	"context"
	"fmt"
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
	if _, err := r.Add(ctx, "stock", Token(1), 10, NoFloor); err != nil {
		t.Fatal(err)
	}

	p.SetDropReplies(true)
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.Add(ctx, "stock", Token(2), -1, 0)
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

// TestRedisAddWindow: a call sent again with its id gets its first result
// and changes nothing, even once its token is stale, while it is among
// the last 8 Adds of the key; past them it is a new call. The record of
// the calls keeps the hash in Redis's compact encoding. The result is
// exact past 2^53.
func TestRedisAddWindow(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	add := func(id string, token, delta int64) (any, error) {
		return r.call(ctx, addScript, "n", id, Token(token), delta, "")
	}
	if v, err := add("FIRST", 5, 10); err != nil || v != "10" {
		t.Fatalf("first call = %v, %v", v, err)
	}
	if _, err := add("NEWER", 6, 1); err != nil {
		t.Fatal(err)
	}
	if v, err := add("FIRST", 5, 10); err != nil || v != "10" {
		t.Fatalf("the first call again, with its now stale token = %v, %v; want its result, 10", v, err)
	}
	for i := range 6 { // FIRST is the 8th last
		if _, err := add(fmt.Sprint("OTHER", i), 6, 1); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := add("FIRST", 6, 10); err != nil || v != "10" {
		t.Fatalf("the first call again, 8th last = %v, %v; want its result, 10", v, err)
	}
	if _, err := add("OTHER6", 6, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := add("FIRST", 6, 10); err != nil { // 9th last: a new call
		t.Fatal(err)
	}
	s, _ := r.Inspect(ctx, "n")
	if s.Value != "28" || s.Writes != 10 {
		t.Fatalf("%+v: want 10+1+7+10 = 28 after 10 writes (FIRST applied again once out of the window)", s)
	}
	h := c.HGetAll(ctx, "n").Val()
	if len(h) != 12 { // value, fence, writes, added, added0 to added7
		t.Fatalf("hash %v: %d fields, want 12", h, len(h))
	}
	if enc := c.ObjectEncoding(ctx, "n").Val(); enc != "listpack" && enc != "ziplist" {
		t.Fatalf("encoding %s, want Redis's compact one", enc)
	}

	const big = 1<<53 + 1 // not a double
	if n, err := r.Add(ctx, "big", Token(7), big, NoFloor); err != nil || n != big {
		t.Fatalf("Add(2^53+1) = %d, %v", n, err)
	}
	if n, err := r.Add(ctx, "big", Token(7), 2, NoFloor); err != nil || n != big+2 {
		t.Fatalf("Add(2) to 2^53+1 = %d, %v; want %d", n, err, int64(big+2))
	}
}
