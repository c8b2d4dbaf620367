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
func replicated(t *testing.T) (*redistest.Server, *redistest.Server, *redis.Client, *faultproxy.Proxy) {
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
	host, port, _ := strings.Cut(p.Addr(), ":")
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	linkUp(t, rc)
	return master, replica, rc, p
}

// linkUp waits until rc's replication link is up.
func linkUp(t *testing.T, rc *redis.Client) {
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
