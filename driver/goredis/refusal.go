package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// refusedFor is how long a refused connection marks its node: for that
// long after the last refusal seen, requests that cannot dial the node
// themselves fail at once. A mark never lasts longer, and any connection
// that the node accepts ends it.
const refusedFor = time.Second

// refusal is the refusal state of one go-redis client, shared by every Node
// made on that client (refusalOf), so that a client behaves the same
// whatever the number of redlock Clients on it: one dial hook per
// *redis.Client, one mark, cleared by whoever first finds the node
// accepting again.
type refusal struct {
	// until (unix nanoseconds) ends the current mark; 0 when the node is
	// not marked. A mark is set by a refused dial or request and renewed
	// by each refusal after it; it ends at until, or at once when a dial
	// or a request succeeds.
	until   atomic.Int64
	refused atomic.Pointer[errRefused]
	// probe, set by the dial hook at a refused dial, dials the node
	// outside go-redis's pool; probing is set while a request does.
	probe   atomic.Pointer[func(context.Context) error]
	probing atomic.Bool
}

// refusals maps a go-redis client to its refusal. Neither side is held: a
// *redis.Client holds its refusal through its dial hook, Nodes hold theirs,
// and an entry goes when its client is collected.
var refusals struct {
	mu sync.Mutex
	m  map[any]weak.Pointer[refusal]
}

// refusalOf returns the refusal of c, making it (and, for a *redis.Client,
// adding its dial hook, once for the client's life) on first use. A
// client of a type this package does not know gets a refusal of its own.
func refusalOf(c redis.UniversalClient) *refusal {
	switch c := c.(type) {
	case *redis.Client:
		return sharedRefusal(c, func(g *refusal) { c.AddHook(dialWatch{g}) })
	case *redis.ClusterClient:
		// No hook: one shard's refusal must not close every shard's
		// dials. The refusal sees requests' errors only.
		return sharedRefusal(c, nil)
	case *redis.Ring:
		return sharedRefusal(c, nil)
	}
	return &refusal{}
}

func sharedRefusal[T any](c *T, hook func(*refusal)) *refusal {
	key := weak.Make(c)
	refusals.mu.Lock()
	defer refusals.mu.Unlock()
	wp, known := refusals.m[key]
	if g := wp.Value(); known && g != nil {
		return g
	}
	// A hooked client holds its refusal for its life, so only a client
	// without a hook can be known with its refusal gone (no Node left on
	// it): it gets a new one, and had its cleanup already.
	g := &refusal{}
	if refusals.m == nil {
		refusals.m = make(map[any]weak.Pointer[refusal])
	}
	refusals.m[key] = weak.Make(g)
	if !known {
		if hook != nil {
			hook(g)
		}
		runtime.AddCleanup(c, func(key weak.Pointer[T]) {
			refusals.mu.Lock()
			delete(refusals.m, key)
			refusals.mu.Unlock()
		}, key)
	}
	return g
}

// errRefused is the error of a node that refused connections: it names
// the dial's error and is syscall.ECONNREFUSED for errors.Is. It does not
// unwrap to the dial's error: go-redis retries a request whose error is a
// dial's *net.OpError, or carries a Timeout method as syscall.Errno does,
// and the dial hook's refusal must end the request instead.
type errRefused struct {
	since time.Time // the outage's first refusal
	at    time.Time // this refusal: the error says how long the outage was then
	err   error
}

func (e *errRefused) Error() string {
	return fmt.Sprintf("connection refused: the node has refused connections for %v: %v",
		e.at.Sub(e.since).Round(time.Millisecond), e.err)
}

// Is reports whether target is syscall.ECONNREFUSED.
func (e *errRefused) Is(target error) bool { return target == syscall.ECONNREFUSED }

// err returns the refusal of the current mark, or nil.
func (g *refusal) err() error {
	if e := g.refused.Load(); e != nil {
		return e
	}
	return nil
}

// marked reports whether a mark is in force at now (unix nanoseconds).
func (g *refusal) marked(now int64) bool {
	until := g.until.Load()
	return until != 0 && now < until
}

// check runs before each request of a Node. While the node is marked, it
// dials the node through the dial hook's probe when there is one and no
// other request is dialling, and lets the request go on if the node
// accepts (which ends the mark) or fails it with the refusal. A request
// that cannot probe fails at once while the mark is in force, and goes
// through to go-redis once it has ended.
func (g *refusal) check(ctx context.Context) error {
	if g.until.Load() == 0 {
		return nil
	}
	if p := g.probe.Load(); p != nil && g.probing.CompareAndSwap(false, true) {
		err := (*p)(ctx)
		g.probing.Store(false)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			// Accepted, or not refused (a timeout is the request's to
			// meet): go-redis dials it.
			g.clear()
			return nil
		}
		g.refuse(err)
		return g.err()
	}
	if g.marked(time.Now().UnixNano()) {
		if err := g.err(); err != nil {
			return err
		}
	}
	return nil
}

// observe records a request's outcome: a refusal marks the node, any
// other outcome (a reply, or a failure that is not a refusal) ends the
// mark.
func (g *refusal) observe(err error) {
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		g.refuse(err)
		return
	}
	if g.until.Load() != 0 {
		g.clear()
	}
}

// refuse marks the node, or renews its mark, after a refused connection,
// unless err is the refusal's own refusal (which records no new one).
func (g *refusal) refuse(err error) {
	var already *errRefused
	if errors.As(err, &already) {
		return
	}
	now := time.Now()
	since := now
	if prev := g.refused.Load(); prev != nil && g.until.Load() != 0 {
		since = prev.since // the same outage
	}
	g.refused.Store(&errRefused{since: since, at: now, err: err})
	g.until.Store(now.Add(refusedFor).UnixNano())
}

// clear ends the mark.
func (g *refusal) clear() { g.until.Store(0) }

// dialWatch is the go-redis hook refusalOf adds to a standalone or Sentinel
// client, once: it watches the client's dials, and keeps go-redis's dials
// off a node that refuses them for as long as the mark lasts.
type dialWatch struct{ g *refusal }

// DialHook implements redis.Hook. A refused dial marks the node and gives
// it a probe that dials through next; while the mark is in force a dial
// fails at once with the refusal, without touching the network, so that a
// series of dials in flight ends soon. Once the mark has ended, dials go
// to the network: a refused one renews the mark, an accepted one clears
// it. Every refused dial returns the node's errRefused, which go-redis does
// not retry as a request.
func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if w.g.marked(time.Now().UnixNano()) {
			if err := w.g.err(); err != nil {
				return nil, err
			}
		}
		conn, err := next(ctx, network, addr)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			probe := func(ctx context.Context) error {
				c, err := next(ctx, network, addr)
				if err != nil {
					return err
				}
				return c.Close()
			}
			w.g.probe.Store(&probe)
			w.g.refuse(err)
			if err := w.g.err(); err != nil {
				return nil, err
			}
		}
		if err == nil && w.g.until.Load() != 0 {
			w.g.clear()
		}
		return conn, err
	}
}

// ProcessHook implements redis.Hook: requests pass unchanged.
func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook implements redis.Hook: pipelines pass unchanged.
func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
