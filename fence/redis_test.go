package fence

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestScriptDigests checks the digests written in redis.go against the
// scripts' sources (computing them at run time would panic in FIPS
// 140-only mode, where this test is skipped).
func TestScriptDigests(t *testing.T) {
	if strings.Contains(os.Getenv("GODEBUG"), "fips140=only") {
		t.Skip("SHA-1 is refused in FIPS 140-only mode")
	}
	for name, s := range map[string]script{"set": setScript, "get": getScript, "shared": sharedScript, "add": addScript, "inspect": inspectScript, "reset": resetScript} {
		h := sha1.Sum([]byte(s.src))
		if got := hex.EncodeToString(h[:]); got != s.sha {
			t.Errorf("%s: digest %s in redis.go, the source's is %s", name, s.sha, got)
		}
	}
}

func newRedis(t *testing.T, opts ...Option) (*Redis, *redis.Client) {
	t.Helper()
	return newRedisB(t, opts...)
}

func newRedisB(tb testing.TB, opts ...Option) (*Redis, *redis.Client) {
	tb.Helper()
	c := redistest.Start(tb, 1)[0].Client()
	tb.Cleanup(func() { _ = c.Close() })
	return NewRedis(c, opts...), c
}

// stale fails the test unless err is a *StaleError for token with fence.
func stale(t *testing.T, err error, token, fence int64) {
	t.Helper()
	var se *StaleError
	if !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.Token != token || se.Fence != fence {
		t.Fatalf("err = %v, want a stale token %d below %d", err, token, fence)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(token)) || !strings.Contains(msg, fmt.Sprint(fence)) {
		t.Fatalf("error %q does not say both tokens", msg)
	}
}

func TestRedisSet(t *testing.T) {
	r, _ := newRedis(t)
	ctx := context.Background()
	steps := []struct {
		token int64
		value string
		fence int64 // > 0: refused below it
	}{
		{10, "a", 0},
		{10, "b", 0}, // the same holder writes again: equal tokens pass
		{12, "c", 0},
		{11, "d", 12}, // a holder that lost its lock
		{12, "e", 0},  // equal to the fence
		{1, "f", 12},
		{13, "g", 0},
	}
	for _, st := range steps {
		err := r.Set(ctx, "acct", Token(st.token), st.value)
		if st.fence > 0 {
			stale(t, err, st.token, st.fence)
		} else if err != nil {
			t.Fatalf("Set(%d, %q): %v", st.token, st.value, err)
		}
	}
	s, err := r.Inspect(ctx, "acct")
	if err != nil || s != (State{Value: "g", Exists: true, Fence: 13, Writes: 5, Refused: 2}) {
		t.Fatalf("Inspect = %+v, %v", s, err)
	}
	if err := r.Set(ctx, "", Token(1), "x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Set with an empty key: %v, want ErrInvalid", err)
	}
}

// TestRedisReadModifyWrite: a holder that read with token 20 refuses an
// older one (14) that read before it, though 20 has not written yet; with
// plain GET and SET (the control) the older holder's write is accepted and
// the newer one's, based on the same read, loses an update.
func TestRedisReadModifyWrite(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	if err := r.Set(ctx, "stock", Token(5), "100"); err != nil {
		t.Fatal(err)
	}
	old, _, err := r.Get(ctx, "stock", Token(14))
	if err != nil || old != "100" {
		t.Fatalf("Get(14) = %q, %v", old, err)
	}
	cur, ok, err := r.Get(ctx, "stock", Token(20))
	if err != nil || !ok || cur != "100" {
		t.Fatalf("Get(20) = %q, %v, %v", cur, ok, err)
	}
	stale(t, r.Set(ctx, "stock", Token(14), "99"), 14, 20)
	_, _, err = r.Get(ctx, "stock", Token(14))
	stale(t, err, 14, 20)
	if err := r.Set(ctx, "stock", Token(20), "99"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, "none", Token(1)); ok || err != nil {
		t.Fatalf("Get of a missing value: ok %v, %v", ok, err)
	}

	// The control: the same interleaving with plain commands.
	c.Set(ctx, "plain", "100", 0)
	a := c.Get(ctx, "plain").Val()
	b := c.Get(ctx, "plain").Val()
	if err := c.Set(ctx, "plain", dec(a), 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "plain", dec(b), 0)
	if v := c.Get(ctx, "plain").Val(); v != "99" {
		t.Fatalf("control: %s, want 99 (two decrements, one lost)", v)
	}
}

func dec(s string) string {
	var n int
	fmt.Sscan(s, &n)
	return fmt.Sprint(n - 1)
}

// TestRedisNegative: negative tokens are refused unless allowed; allowed,
// they are compared exactly: two degraded tokens one lease version apart
// are equal as Lua numbers (doubles), not here.
func TestRedisNegative(t *testing.T) {
	ctx := context.Background()
	r, c := newRedis(t)
	err := r.Set(ctx, "k", Token(-5), "x")
	var se *StaleError
	if !errors.Is(err, ErrStale) || !errors.As(err, &se) || !se.Negative || !strings.Contains(err.Error(), "-5") {
		t.Fatalf("negative token: %v, want a refusal", err)
	}
	if n, _ := c.Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("a refused negative token wrote")
	}

	r = NewRedis(c, AllowNegative())
	base := int64(math.MinInt64) + 1_800_000_000_000_000 // a degraded token
	if err := r.Set(ctx, "k", Token(base+1), "new"); err != nil {
		t.Fatal(err)
	}
	stale(t, r.Set(ctx, "k", Token(base), "old"), base, base+1)
	if err := r.Set(ctx, "k", Token(1), "redis"); err != nil {
		t.Fatal(err)
	}
	stale(t, r.Set(ctx, "k", Token(base+2), "degraded"), base+2, 1)
	if float64(base) != float64(base+1) {
		t.Fatal("the tokens are exact as doubles: the test shows nothing")
	}
}

func TestRedisAdd(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	if n, err := r.Add(ctx, "stock", Token(7), 2, NoFloor); err != nil || n != 2 {
		t.Fatalf("Add(+2) = %d, %v", n, err)
	}
	for want := int64(1); want >= 0; want-- {
		if n, err := r.Add(ctx, "stock", Token(7), -1, 0); err != nil || n != want {
			t.Fatalf("Add(-1) = %d, %v; want %d", n, err, want)
		}
	}
	_, err := r.Add(ctx, "stock", Token(8), -1, 0)
	var be *BoundError
	if !errors.Is(err, ErrBound) || !errors.As(err, &be) || be.Value != 0 || be.Floor != 0 {
		t.Fatalf("Add below the floor: %v, want ErrBound", err)
	}
	_, err = r.Add(ctx, "stock", Token(6), 5, 0)
	stale(t, err, 6, 7) // a refusal by the floor records no token
	if n, err := r.Add(ctx, "stock", Token(9), -3, NoFloor); err != nil || n != -3 {
		t.Fatalf("Add without a floor = %d, %v", n, err)
	}
	s, _ := r.Inspect(ctx, "stock")
	if s.Value != "-3" || s.Fence != 9 || s.Bounded != 1 || s.Refused != 1 || s.Writes != 4 {
		t.Fatalf("state %+v", s)
	}
	c.HSet(ctx, "text", "value", "abc")
	if _, err := r.Add(ctx, "text", Token(1), 1, NoFloor); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add to a non-integer: %v, want ErrInvalid", err)
	}
}

func TestRedisEval(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	const push = `redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('LLEN', KEYS[1])`
	v, err := r.Eval(ctx, "{q}:fence", Token(5), push, []string{"{q}:list"}, "a")
	if err != nil || v != int64(1) {
		t.Fatalf("Eval = %v, %v", v, err)
	}
	if v, err = r.Eval(ctx, "{q}:fence", Token(6), push, []string{"{q}:list"}, "b"); err != nil || v != int64(2) {
		t.Fatalf("Eval = %v, %v", v, err)
	}
	_, err = r.Eval(ctx, "{q}:fence", Token(5), push, []string{"{q}:list"}, "late")
	stale(t, err, 5, 6)
	if got := c.LRange(ctx, "{q}:list", 0, -1).Val(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("list %v: the refused script ran", got)
	}
	// The caller's hash as the fence's: its fields are kept.
	c.HSet(ctx, "user:1", "name", "ann")
	if _, err := r.Eval(ctx, "user:1", Token(3), `return redis.call('HSET', KEYS[1], 'name', ARGV[1])`, []string{"user:1"}, "bob"); err != nil {
		t.Fatal(err)
	}
	if m := c.HGetAll(ctx, "user:1").Val(); m["name"] != "bob" || m["fence"] != "3" {
		t.Fatalf("hash %v", m)
	}
	for _, e := range []string{"MINE failed", "STALE 1 2"} { // the script's own errors, as they are
		_, err := r.Eval(ctx, "{q}:fence", Token(7), `return redis.error_reply(ARGV[1])`, nil, e)
		if err == nil || err.Error() != e || errors.Is(err, ErrStale) {
			t.Fatalf("the script's own error %q: %v", e, err)
		}
	}
}

func TestRedisGetShared(t *testing.T) {
	r, _ := newRedis(t)
	ctx := context.Background()
	if err := r.Set(ctx, "doc", Token(10), "v1"); err != nil {
		t.Fatal(err)
	}
	// Readers 31 and 30 overlap and read in any order.
	for _, tok := range []int64{31, 30} {
		if v, _, err := r.GetShared(ctx, "doc", Token(tok)); err != nil || v != "v1" {
			t.Fatalf("GetShared(%d) = %q, %v", tok, v, err)
		}
	}
	stale(t, r.Set(ctx, "doc", Token(25), "old"), 25, 31) // a writer older than a reader
	_, _, err := r.Get(ctx, "doc", Token(30))
	stale(t, err, 30, 31)
	if err := r.Set(ctx, "doc", Token(32), "v2"); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.GetShared(ctx, "doc", Token(31)) // a reader older than a write
	stale(t, err, 31, 32)
}

// TestRedisCluster runs the operations on a Redis Cluster through a
// cluster client: each call is one script on the key's master.
func TestRedisCluster(t *testing.T) {
	cl := redistest.StartClusterT(t, 3)
	c := cl.Client()
	t.Cleanup(func() { _ = c.Close() })
	r := NewRedis(c)
	ctx := context.Background()
	for i := range 20 { // keys on every master
		k := fmt.Sprintf("item:%d", i)
		if err := r.Set(ctx, k, Token(10), "v"); err != nil {
			t.Fatalf("Set %s: %v", k, err)
		}
		stale(t, r.Set(ctx, k, Token(9), "old"), 9, 10)
		if _, err := r.Add(ctx, k+":n", Token(10), -1, 0); !errors.Is(err, ErrBound) {
			t.Fatalf("Add %s: %v", k, err)
		}
		if _, err := r.Eval(ctx, "{"+k+"}", Token(11), `return redis.call('SET', KEYS[1], ARGV[1])`, []string{"{" + k + "}:x"}, "y"); err != nil {
			t.Fatalf("Eval %s: %v", k, err)
		}
		if s, err := r.Inspect(ctx, k); err != nil || s.Fence != 10 || s.Refused != 1 {
			t.Fatalf("Inspect %s = %+v, %v", k, s, err)
		}
	}
}

// TestRedisSentinelFailover: through a Sentinel failover client, the fence
// replicates with its data (one hash): after a failover, the promoted
// replica refuses the stale token. (Replication is asynchronous: WAIT makes
// sure the replica has the write, as the data itself would need.)
func TestRedisSentinelFailover(t *testing.T) {
	d := redistest.StartSentinelT(t, "fence-test")
	c := d.FailoverClient()
	t.Cleanup(func() { _ = c.Close() })
	r := NewRedis(c)
	ctx := context.Background()
	if err := r.Set(ctx, "account:7", Token(10), "a"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 100 { // the client finds the new master
		if err = r.Set(ctx, "account:7", Token(9), "stale"); !notFenceAnswer(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stale(t, err, 9, 10)
	if err := r.Set(ctx, "account:7", Token(11), "b"); err != nil {
		t.Fatal(err)
	}
}

// notFenceAnswer is an error other than the fence's: the old master turned
// replica (READONLY) or a connection the failover closed.
func notFenceAnswer(err error) bool {
	return err != nil && !errors.Is(err, ErrStale)
}

// TestRedisEvalCallerErrors: the caller's script returns errors spelled as
// the package's own refusals; each comes back as it is, never as a
// refusal (ErrStale, ErrBound, ErrInvalid).
func TestRedisEvalCallerErrors(t *testing.T) {
	r, _ := newRedis(t)
	ctx := context.Background()
	for _, e := range []string{"FENCE_STALE 1 2", "FENCE_STALE 7 9", "FENCE_BOUND 1 -2 0", "FENCE_NOTINT abc", "FENCE_RANGE 1 2"} {
		_, err := r.Eval(ctx, "{q}:fence", Token(7), `return redis.error_reply(ARGV[1])`, nil, e)
		if err == nil || err.Error() != e || errors.Is(err, ErrStale) || errors.Is(err, ErrBound) || errors.Is(err, ErrInvalid) {
			t.Errorf("the script's own error %q came back as %v", e, err)
		}
	}
}

// TestRedisAddFailureChangesNothing: an Add that Redis cannot apply (a
// value with a leading zero, which HINCRBY refuses, or a counter that
// would overflow int64) fails with ErrInvalid and leaves the fence and
// the count of writes as they were.
func TestRedisAddFailureChangesNothing(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		value string
		delta int64
	}{
		{"007", 1},
		{"9223372036854775807", 1},
		{"-9223372036854775808", -1},
		{"-0", 1},
		{"1.5", 1},
	} {
		key := "counter:" + tc.value
		c.HSet(ctx, key, "value", tc.value)
		_, err := r.Add(ctx, key, Token(5), tc.delta, NoFloor)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.value) {
			t.Errorf("Add(%+d) to %s: %v, want ErrInvalid naming the value", tc.delta, tc.value, err)
		}
		s, err := r.Inspect(ctx, key)
		if err != nil || s != (State{Value: tc.value, Exists: true}) {
			t.Errorf("after a failed Add(%+d) to %s: %+v, %v; want the value alone, no fence, no write", tc.delta, tc.value, s, err)
		}
	}
}
