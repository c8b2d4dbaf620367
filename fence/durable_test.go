package fence

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

// replicated starts a master and a replica whose replication link runs
// through a fault proxy (so that a test can slow it or cut it), waits
// until the link is up, and returns the master, the replica's server and
// client, and the proxy.
func replicated(t testing.TB) (*redistest.Server, *redistest.Server, *redis.Client, *faultproxy.Proxy) {
	t.Helper()
	servers := redistest.Start(t, 2)
	master, replica := servers[0], servers[1]
	p, err := faultproxy.New(master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := replica.Client()
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	mc := master.Client()
	defer mc.Close()
	// The full sync starts at once, not after diskless sync's 5 s delay.
	if err := mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(p.Addr(), ":")
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	linkUp(t, rc)
	// After a diskless sync the master streams writes once the replica's
	// first acknowledgement came (its replication cron, up to a second):
	// until then WAIT waits. One write acknowledged ends that.
	conn := mc.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "replicated", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctx, 1, 10*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("WAIT after the replica's sync: %d, %v", n, err)
	}
	return master, replica, rc, p
}

// linkUp waits until rc's replication link is up.
func linkUp(t testing.TB, rc *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rc.Info(context.Background(), "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("the replica's link is not up after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replicaFence waits until the replica's record at key has fence want.
func replicaFence(t *testing.T, rc *redis.Client, key, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rc.HGet(context.Background(), key, "fence").Val() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the replica's fence of %s is not %s after 10s", key, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// promote kills master, closes the replication proxy (so that nothing it
// still holds reaches the replica) and promotes the replica.
func promote(t *testing.T, master *redistest.Server, rc *redis.Client, p *faultproxy.Proxy) {
	t.Helper()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	if err := rc.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRedisFailoverDurable is finding 1 of issue 46: a fence acknowledged
// by the master and lost at a failover. The replica is at fence 10; its
// replication lags (300 ms each way); the master acknowledges Set(20) and
// dies at once; the replica takes over; the stale holder's Set(15) was
// accepted. With Durable, Set(20) is acknowledged only once the replica
// has it, and the promoted replica refuses Set(15). With the replica cut
// off, Set(20) is reported not durable (ErrNotDurable): the caller knows
// the master may have applied it, as it did.
func TestRedisFailoverDurable(t *testing.T) {
	seq := func(tok int64) Sequencer { return Sequencer{Lock: "acct", Kind: "plain", Token: tok} }
	ctx := context.Background()
	t.Run("lagging replica", func(t *testing.T) {
		master, _, rc, p := replicated(t)
		mc := master.Client()
		t.Cleanup(func() { _ = mc.Close() })
		r := NewRedis(mc, Durable(1, 10*time.Second))
		if err := r.Set(ctx, "acct", seq(10), "v10"); err != nil {
			t.Fatal(err)
		}
		replicaFence(t, rc, "acct", "10")
		p.SetLatency(300 * time.Millisecond)
		if err := r.Set(ctx, "acct", seq(20), "v20"); err != nil {
			t.Fatalf("Set(20): %v", err)
		}
		promote(t, master, rc, p) // right after the acknowledgement
		err := NewRedis(rc).Set(ctx, "acct", seq(15), "v15")
		if !errors.Is(err, ErrStale) {
			t.Fatalf("after the failover, the stale holder's Set(15): %v; want it refused, the acknowledged fence 20 kept (replica's record %v)",
				err, rc.HGetAll(ctx, "acct").Val())
		}
		stale(t, err, 15, 20)
	})
	t.Run("replica cut off", func(t *testing.T) {
		master, _, rc, p := replicated(t)
		mc := master.Client()
		t.Cleanup(func() { _ = mc.Close() })
		r := NewRedis(mc, Durable(1, 300*time.Millisecond))
		if err := r.Set(ctx, "acct", seq(10), "v10"); err != nil {
			t.Fatal(err)
		}
		replicaFence(t, rc, "acct", "10")
		p.SetBlackhole(true)
		err := r.Set(ctx, "acct", seq(20), "v20")
		if !errors.Is(err, ErrNotDurable) {
			t.Fatalf("Set(20) with the replica cut off: %v; want ErrNotDurable (an acknowledged write the replica never got)", err)
		}
		if st, _ := r.Inspect(ctx, "acct"); st.Fence != 20 || st.Value != "v20" {
			t.Fatalf("the master's record after a write not durable: %+v; want it applied, as the error says it may be", st)
		}
	})
}

// scriptOnly is a RedisClient that gives no connection of its own.
type scriptOnly struct{ c *redis.Client }

func (s scriptOnly) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return s.c.Eval(ctx, src, keys, args...)
}

func (s scriptOnly) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.c.EvalSha(ctx, sha, keys, args...)
}

// TestRedisDurableResults: a write not durable still returns what the
// master answered beside ErrNotDurable (Get's value, Add's new count); a
// refused write does not wait; a durable write on a healthy replica
// returns nil; settings WAIT cannot honour, and a client without a
// connection of its own, are ErrInvalid.
func TestRedisDurableResults(t *testing.T) {
	master, _, rc, p := replicated(t)
	mc := master.Client()
	t.Cleanup(func() { _ = mc.Close() })
	ctx := context.Background()
	seq := func(tok int64) Sequencer { return Sequencer{Lock: "stock", Kind: "plain", Token: tok} }
	r := NewRedis(mc, Durable(1, 200*time.Millisecond))
	if n, err := r.Add(ctx, "stock", seq(5), 10, NoFloor); n != 10 || err != nil {
		t.Fatalf("Add with the replica up: %d, %v", n, err)
	}
	replicaFence(t, rc, "stock", "5")
	p.SetBlackhole(true)
	if n, err := r.Add(ctx, "stock", seq(6), -1, 0); n != 9 || !errors.Is(err, ErrNotDurable) {
		t.Errorf("Add with the replica cut off: %d, %v; want 9 and ErrNotDurable", n, err)
	}
	if v, ok, err := r.Get(ctx, "stock", seq(7)); v != "9" || !ok || !errors.Is(err, ErrNotDurable) {
		t.Errorf("Get with the replica cut off: %q, %v, %v; want 9 and ErrNotDurable", v, ok, err)
	}
	start := time.Now()
	if err := r.Set(ctx, "stock", seq(6), "x"); !errors.Is(err, ErrStale) || errors.Is(err, ErrNotDurable) {
		t.Errorf("a stale Set: %v; want ErrStale alone", err)
	}
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Errorf("a refused write took %v: it waited for the replicas", d)
	}
	for name, opt := range map[string]Option{"negative": Durable(-1, time.Second), "no timeout": Durable(1, 0)} {
		if err := NewRedis(mc, opt).Set(ctx, "k", seq(1), "v"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Durable %s: %v, want ErrInvalid", name, err)
		}
	}
	if err := NewRedis(scriptOnly{mc}, Durable(1, time.Second)).Set(ctx, "k", seq(1), "v"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Durable on a client without Conn: %v, want ErrInvalid", err)
	}
}

// TestRedisMinReplicasToWrite: a master with min-replicas-to-write and no
// replica refuses a fenced write, and a fenced read (which records a
// token), at its first command: nothing of the record is written, so no
// fence is raised that a failover would lose (docs/fencing.md, "Durable
// fences").
func TestRedisMinReplicasToWrite(t *testing.T) {
	c := redistest.Start(t, 1, redistest.Options{Args: []string{"--min-replicas-to-write", "1"}})[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	r := NewRedis(c)
	ctx := context.Background()
	s := Sequencer{Lock: "acct", Kind: "plain", Token: 5}
	if err := r.Set(ctx, "acct", s, "v"); err == nil || !strings.HasPrefix(err.Error(), "NOREPLICAS") {
		t.Fatalf("Set without a replica: %v, want NOREPLICAS", err)
	}
	if _, _, err := r.Get(ctx, "acct", s); err == nil || !strings.HasPrefix(err.Error(), "NOREPLICAS") {
		t.Fatalf("Get without a replica: %v, want NOREPLICAS", err)
	}
	if n := c.Exists(ctx, "acct").Val(); n != 0 {
		t.Fatalf("the record exists after the refused writes")
	}
}
