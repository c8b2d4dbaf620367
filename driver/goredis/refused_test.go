package goredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// dialLog counts go-redis's log lines that name one address.
type dialLog struct {
	addr string
	mu   sync.Mutex
	n    int
	last string
}

func (l *dialLog) Printf(_ context.Context, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !strings.Contains(s, l.addr) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	l.last = s
}

func (l *dialLog) count() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.last
}

// A node whose server is gone, on go-redis's default options (five dials
// per series, requests retried on a dial error): its requests fail with
// the refusal (errors.Is syscall.ECONNREFUSED), the first within its
// deadline and the later ones at once; go-redis logs the refusal once for
// the whole outage, not once per request; and once the server is back,
// the next request reaches it.
func TestRefusingNodeIsGated(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	n := New(rc)
	log := &dialLog{addr: s.Addr()}
	redis.SetLogger(log)
	defer redis.SetLogger(quiet{})

	ctx := context.Background()
	if _, err := n.Do(ctx, "PING"); err != nil {
		t.Fatalf("PING before the kill: %v", err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	// The pooled connection breaks first; the requests after it dial.
	var first time.Duration
	for i := range 3 {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.Do(rctx, "PING")
		cancel()
		if errors.Is(err, syscall.ECONNREFUSED) {
			first = time.Since(start)
			break
		}
		if i == 2 {
			t.Fatalf("PING on a killed server: %v, want connection refused", err)
		}
	}
	// go-redis's series of five dials, 100 ms apart, ends at the first
	// refusal's answer; its retries of the request would take seconds.
	if first > 3*time.Second {
		t.Errorf("the first refused request took %v", first)
	}
	// Three seconds of requests: each fails at once, with the refusal.
	end := time.Now().Add(3 * time.Second)
	requests := 0
	for time.Now().Before(end) {
		start := time.Now()
		_, err := n.Do(ctx, "PING")
		if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("PING on a refusing node: %v, want connection refused", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a refused PING took %v: it went through go-redis's dials", d)
		}
		requests++
		time.Sleep(20 * time.Millisecond)
	}
	if lines, last := log.count(); lines != 1 {
		t.Errorf("go-redis logged %d lines for the refusing node over %d requests, want 1; the last: %s", lines, requests, last)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Do(ctx, "PING"); err != nil {
		t.Fatalf("the first PING after the restart: %v", err)
	}
	if lines, last := log.count(); lines != 1 {
		t.Errorf("go-redis logged %d lines for the node, want 1; the last: %s", lines, last)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
