package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/redistest"
)

// sharedClients starts a redis-server and returns it, a go-redis client of
// it on go-redis's default options, and two redlock Clients made with
// redlock.New on that one client. Each Client has locked and released once.
// The restart guard is off: the server restarts without its data, and
// these tests are about connections, not votes.
func sharedClients(t *testing.T) (*redistest.Server, *redis.Client, *redlock.Client, *redlock.Client) {
	t.Helper()
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	redis.SetLogger(quietLog{})
	t.Cleanup(func() { redis.SetLogger(quietLog{}) })
	var cs [2]*redlock.Client
	for i := range cs {
		c, err := redlock.New([]redis.UniversalClient{rc}, redlock.WithoutBreaker(), redlock.WithRestartGuard(redlock.GuardOff))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
		cycle(t, c, fmt.Sprintf("before-%d", i))
	}
	return s, rc, cs[0], cs[1]
}

// cycle obtains and releases a lock on c, failing the test otherwise.
func cycle(t *testing.T, c *redlock.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryObtain(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain %s: %v", name, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release %s: %v", name, err)
	}
}

// outage kills s and has c try to lock until a request of c has found the
// node refusing connections (the go-redis client's dial hook has seen a
// refused dial); a PING through rc then fails too.
func outage(t *testing.T, s *redistest.Server, rc *redis.Client, c *redlock.Client) {
	t.Helper()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := c.TryObtain(ctx, fmt.Sprintf("during-%d", i), 10*time.Second)
		cancel()
		if err == nil {
			_ = l.Release(context.Background())
			t.Fatal("obtained on a killed server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("PING through the go-redis client during the outage: %v, want connection refused", err)
	}
}

// Two redlock Clients on one go-redis client, one of them idle, across a
// restart of the server on its port: the busy Client's first request after
// the restart reaches the server, and so does a PING through the go-redis
// client right after it. Before the Nodes of one client shared their dial
// hook, each Client added a hook of its own, and the idle Client's hook
// refused every dial until that Client's own next request.
func TestSharedClientIdleClientAcrossRestart(t *testing.T) {
	s, rc, busy, idle := sharedClients(t)
	_ = idle
	outage(t, s, rc, busy)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	cycle(t, busy, "after")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through the shared go-redis client after the busy Client's request: %v", err)
	}
	cycle(t, idle, "after-idle")
}

// Two redlock Clients on one go-redis client, both idle after the outage:
// a PING through the go-redis client reaches the restarted server soon
// after the restart, with no request of either Client to end the mark. A
// mark lasts a second after the last refusal; the bound here is five.
func TestSharedClientMarkEndsWithoutIdleClients(t *testing.T) {
	s, rc, busy, _ := sharedClients(t)
	outage(t, s, rc, busy)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = rc.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("PING through the go-redis client 5 s after the restart, with both Clients idle: %v", err)
}

// Nodes made by goredis.New on one client, however many, share one dial
// hook: the client's dials go through one hook, and a refusal seen by any
// Node's request is the mark of every Node on the client.
func TestSharedClientOneHook(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	redis.SetLogger(quietLog{})
	t.Cleanup(func() { redis.SetLogger(quietLog{}) })
	counter := &dialCounter{}
	rc.AddHook(counter)
	var nodes []*goredis.Node
	for range 4 {
		nodes = append(nodes, goredis.New(rc))
	}
	ctx := context.Background()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	// The pooled connection breaks first; the requests after it dial.
	var err error
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = nodes[0].Do(rctx, "PING")
		cancel()
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("PING on a killed server: %v, want connection refused", err)
	}
	// Every other Node's request is gated by the same mark: it dials the
	// node once itself, and fails at once, without a dial of go-redis's.
	before := counter.n.Load()
	for _, n := range nodes[1:] {
		start := time.Now()
		if _, err := n.Do(ctx, "PING"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("PING of another Node on the client: %v, want connection refused", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a refused PING took %v: it went through go-redis's dials", d)
		}
	}
	if d := counter.n.Load() - before; d != 0 {
		t.Errorf("go-redis dialled %d times for the other Nodes' requests, want 0", d)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// One Node's request finds the node back; the others' then go through.
	for i, n := range nodes {
		if _, err := n.Do(ctx, "PING"); err != nil {
			t.Fatalf("PING of Node %d after the restart: %v", i, err)
		}
	}
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// dialCounter is a go-redis hook that counts the client's dials.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (*dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (*dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
