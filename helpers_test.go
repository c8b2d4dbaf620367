package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; tests kill nodes on purpose.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// cluster is a set of real redis-server processes and a client for each.
type cluster struct {
	servers []*redistest.Server
	clients []redis.UniversalClient
	held    map[int]func() // dead nodes' ports held (holdPort), by node
}

// pause stops the given nodes' processes (SIGSTOP) until the test ends, or
// until a Resume before that.
func (cl *cluster) pause(t testing.TB, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		if err := cl.servers[i].Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.servers[i].Resume() })
	}
}

func startNodes(t testing.TB, n int) *cluster {
	t.Helper()
	cl := &cluster{servers: redistest.Start(t, n)}
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cl.clients = append(cl.clients, c)
	}
	return cl
}

// newClient returns a Client closed at the end of the test. Unless opts say
// otherwise, its node timeout is 250 ms (the defaults derived from short
// test TTLs, 10 ms, are too tight for a loaded machine under -race) and the
// restart guard is off: the test's servers were just started, and would
// recover for a minute. The guard's own tests turn it on. So are the
// configuration records, whose script call on each node before the first
// obtain would meet the frozen and paused nodes of other tests; their own
// tests (joint_test.go) turn them on.
func newClient(t *testing.T, nodes []redis.UniversalClient, opts ...Option) *Client {
	t.Helper()
	c, err := New(nodes, testDefaults(opts)...)
	return closedAtEnd(t, c, err)
}

// newClientFrom is newClient over nodes of a driver (NewFromNodes).
func newClientFrom(t *testing.T, nodes []driver.Node, opts ...Option) *Client {
	t.Helper()
	c, err := NewFromNodes(nodes, testDefaults(opts)...)
	return closedAtEnd(t, c, err)
}

// testDefaults are newClient's defaults, then opts.
func testDefaults(opts []Option) []Option {
	defaults := []Option{WithNodeTimeout(250 * time.Millisecond), WithRestartGuard(GuardOff), WithConfigRecords(false)}
	return append(defaults, opts...)
}

// closedAtEnd fails the test on err, else closes c at the end of the test.
func closedAtEnd(t *testing.T, c *Client, err error) *Client {
	t.Helper()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawGet reads a lock's key on one node directly.
func rawGet(t *testing.T, node redis.UniversalClient, name string) (string, bool) {
	t.Helper()
	v, err := node.Get(context.Background(), "{"+limits.Prefix+name+"}").Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	return v, true
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertReleased checks, right after a Release returned, that a quorum of
// nodes no longer holds the lock, and that the others drop it soon: Release
// returns once a quorum deleted the key.
func assertReleased(t *testing.T, nodes []redis.UniversalClient, name string) {
	t.Helper()
	still := 0
	for _, node := range nodes {
		if _, ok := rawGet(t, node, name); ok {
			still++
		}
	}
	if quorum := len(nodes)/2 + 1; len(nodes)-still < quorum {
		t.Errorf("%d of %d nodes still hold the key when Release returns, want at most %d", still, len(nodes), len(nodes)-quorum)
	}
	for i, node := range nodes {
		eventually(t, fmt.Sprintf("node %d drops the released key", i), func() bool {
			_, ok := rawGet(t, node, name)
			return !ok
		})
	}
}

// tooMany is limits.MaxNodes+1 distinct clients (New does no I/O with them).
func tooMany(t *testing.T) []redis.UniversalClient {
	nodes := make([]redis.UniversalClient, limits.MaxNodes+1)
	for i := range nodes {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i)})
		t.Cleanup(func() { _ = c.Close() })
		nodes[i] = c
	}
	return nodes
}

// onEval calls f with every EVALSHA, EVAL or FCALL (the acquire) a client has processed, and
// the error it ended with (NOSCRIPT, for an EVALSHA that EVAL follows).
type onEval func(redis.Cmder, error)

func (onEval) DialHook(next redis.DialHook) redis.DialHook { return next }

// bookkeeping reports whether cmd runs a script of the Client's own
// bookkeeping rather than of a lock: record.lua, the configuration record
// a Client writes before its first obtain (joint.go), or id.lua, the
// nodes' identities it reads at its first contact or, without records,
// in an acquire's pipeline (identity.go). The
// hooks of these tests are about the scripts of locks.
func bookkeeping(cmd redis.Cmder) bool {
	args := cmd.Args()
	k, _ := args[min(3, len(args)-1)].(string)
	return strings.HasSuffix(k, "}:configs") || strings.HasSuffix(k, "}:id")
}
func (f onEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if isScript(cmd) && !bookkeeping(cmd) {
			f(cmd, err)
		}
		return err
	}
}

// ProcessPipelineHook: the go-redis driver sends concurrent requests to one
// node as one pipeline (auto-pipelining), so a script can come that way too.
func (f onEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if isScript(cmd) && !bookkeeping(cmd) {
				f(cmd, cmd.Err())
			}
		}
		return err
	}
}

// isScript reports whether cmd runs one of the library's scripts:
// EVALSHA, EVAL, or FCALL (the acquire, a Redis Function).
func isScript(cmd redis.Cmder) bool {
	name := cmd.Name()
	return name == "evalsha" || name == "eval" || name == "fcall"
}

// aroundEval runs f around every EVALSHA, EVAL and FCALL a client processes; f
// decides whether, and when, to pass the command on (next) and to return.
// A pipeline that holds a script (auto-pipelining) is passed to f as its
// first script: f's next sends the whole pipeline.
type aroundEval func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (aroundEval) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f aroundEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) && !bookkeeping(cmd) {
			return f(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}
func (f aroundEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isScript(cmd) && !bookkeeping(cmd) {
				return f(ctx, cmd, func(ctx context.Context, _ redis.Cmder) error { return next(ctx, cmds) })
			}
		}
		return next(ctx, cmds)
	}
}

// isAcquire and isFence recognise the library's scripts by their shape:
// acquire.lua has three keys and seven arguments, fence.lua two keys (the
// fencing counter first, then the epoch record) and three arguments.
func isAcquire(cmd redis.Cmder) bool { return len(cmd.Args()) == 13 }

// isRelease recognises release.lua by its shape: two keys (the lock's and
// its fencing counter's) and four arguments. It returns the lock's key and
// the publishing flag ("" for a clean-up, which publishes nothing).
func isRelease(cmd redis.Cmder) (key, flag string, ok bool) {
	args := cmd.Args()
	if len(args) != 9 || !strings.HasSuffix(fmt.Sprint(args[4]), ":fence") {
		return "", "", false
	}
	return fmt.Sprint(args[3]), fmt.Sprint(args[6]), true
}
func isFence(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) == 8 && strings.HasSuffix(fmt.Sprint(args[3]), ":fence")
}

// signal is closed once, when an event has happened.
type signal struct {
	once sync.Once
	at   time.Time
	c    chan struct{}
}

func newSignal() *signal { return &signal{c: make(chan struct{})} }

func (s *signal) fire() {
	s.once.Do(func() {
		s.at = time.Now()
		close(s.c)
	})
}

// wait waits for the signal for at most 20 s, and returns when it fired.
func (s *signal) wait(t *testing.T, what string) time.Time {
	t.Helper()
	select {
	case <-s.c:
		return s.at
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
		return time.Time{}
	}
}

// guarded returns a Client with the restart guard on and a short recovery
// window, for servers that were just started: it waits until they are out
// of their first recovery window.
func guarded(t *testing.T, nodes []redis.UniversalClient, maxTTL time.Duration, opts ...Option) *Client {
	t.Helper()
	c := newClient(t, nodes, append([]Option{WithMaxTTL(maxTTL), WithRestartGuard(GuardOn)}, opts...)...)
	waitOutRecovery(t, c, 10*maxTTL, maxTTL)
	return c
}

// waitOutRecovery obtains and releases a lock of ttl with c, waiting up
// to within: servers just started recover for their first window (the
// restart guard) before they vote. The tests' and benchmarks' warm-up.
func waitOutRecovery(tb testing.TB, c *Client, within, ttl time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	l, err := c.Obtain(ctx, "warm-up", ttl)
	if err != nil {
		tb.Fatalf("nodes still recovering after %v: %v", within, err)
	}
	_ = l.Release(ctx)
}

// eventRecorder is a Hook that keeps the events the tests look at, and
// counts attempts.
type eventRecorder struct {
	mu       sync.Mutex
	attempts []AttemptEvent
	obtains  []ObtainEvent
	refreshs []RefreshEvent
	releases []ReleaseEvent
	lost     []LostEvent
	samples  []SampleEvent
	changes  []BreakerEvent
	waits    []WaitEvent
	// ctxs holds, per event type, the value of ctxKey in each event's
	// context, to see each call's context reach the hook.
	ctxs map[string][]any
}

// ctxKey marks a caller's context, to see it reach the hook.
type ctxKey struct{}

func (r *eventRecorder) Observe(ctx context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctxs == nil {
		r.ctxs = make(map[string][]any)
	}
	kind := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", e), "redlock."), "Event")
	r.ctxs[kind] = append(r.ctxs[kind], ctx.Value(ctxKey{}))
	switch e := e.(type) {
	case AttemptEvent:
		r.attempts = append(r.attempts, e)
	case ObtainEvent:
		r.obtains = append(r.obtains, e)
	case RefreshEvent:
		r.refreshs = append(r.refreshs, e)
	case ReleaseEvent:
		r.releases = append(r.releases, e)
	case LostEvent:
		r.lost = append(r.lost, e)
	case SampleEvent:
		r.samples = append(r.samples, e)
	case BreakerEvent:
		r.changes = append(r.changes, e)
	case WaitEvent:
		r.waits = append(r.waits, e)
	}
}

// degraded is the ObtainEvents of locks obtained in degraded mode.
func (r *eventRecorder) degraded() []ObtainEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ObtainEvent
	for _, e := range r.obtains {
		if e.Degraded {
			out = append(out, e)
		}
	}
	return out
}

// lastObtain is the last ObtainEvent of name.
func (r *eventRecorder) lastObtain(t *testing.T, name string) ObtainEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.obtains) - 1; i >= 0; i-- {
		if r.obtains[i].Name == name {
			return r.obtains[i]
		}
	}
	t.Fatalf("no ObtainEvent of %s", name)
	return ObtainEvent{}
}

// transitions lists the breaker's changes seen, as "from>to".
func (r *eventRecorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.changes {
		out = append(out, string(e.From)+">"+string(e.To))
	}
	return out
}

func (r *eventRecorder) attemptCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.attempts)
}

// reader and writer are the handles of the read-write lock named name.
func reader(c *Client, name string) Locker { r, _ := c.RWMutex(name); return r }
func writer(c *Client, name string) Locker { _, w := c.RWMutex(name); return w }
