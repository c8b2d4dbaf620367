package script

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	lockkeys "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// clusterKeys are a lock's keys on a Redis Cluster: its epoch record in
// its own slot.
func clusterKeys(name string) Keys {
	lock := "{" + name + "}"
	return Keys{Lock: lock, Fence: lockkeys.Fence(lock), Epoch: lockkeys.ClusterEpoch(lock)}
}

// On a Redis Cluster, each master has its own functions: a call that
// finds the library missing loads it on every master, and each shard's
// calls run as functions, after a FUNCTION FLUSH of every master and of a
// single one too.
func TestLibraryOnCluster(t *testing.T) {
	forgetNoFunctions(t)
	rc := redistest.StartClusterT(t, 3)
	cc := rc.Client()
	t.Cleanup(func() { _ = cc.Close() })
	n := goredis.New(cc)
	ctx := context.Background()
	masters := func() []*redis.Client {
		var (
			mu sync.Mutex
			ms []*redis.Client
		)
		// ForEachMaster calls on a goroutine per master.
		if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			ms = append(ms, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(ms) != 3 {
			t.Fatalf("%d masters, want 3", len(ms))
		}
		return ms
	}
	// Locks on every shard: 30 names spread over the slots.
	cycles := func(round string) {
		t.Helper()
		for i := range 30 {
			cycle(t, n, clusterKeys(round+strconv.Itoa(i)), off, Ack{})
		}
	}
	cycles("a")
	for _, m := range masters() {
		if !hasLibrary(t, m) || cmdCalls(t, m, "fcall") == 0 {
			t.Errorf("master %s: no library, or no FCALL ran there", m.Options().Addr)
		}
	}
	for _, m := range masters() {
		if err := m.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cycles("b")
	// One shard loses the library alone (a failover to a replica that
	// never got it looks the same to the client).
	first := masters()[0]
	if err := first.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cycles("c")
	for _, m := range masters() {
		if !hasLibrary(t, m) {
			t.Errorf("master %s: no library after the flushes", m.Options().Addr)
		}
		if acquireScripted(t, m) {
			t.Errorf("master %s: the acquire ran as a script", m.Options().Addr)
		}
	}
	// The guard through the function on a shard: a lock's own epoch
	// record, recovering on its first use. A new record recovers until the
	// process start plus the max TTL: a minute, not on's 2 s, which a
	// loaded CI machine had spent starting the cluster and the cycles.
	long := on
	long.MaxTTL = time.Minute
	a, err := Acquire(ctx, n, clusterKeys("guarded"), "mine", time.Minute, long, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("guarded acquire on a new epoch record: %+v, %v; want recovering", a, err)
	}
}

// A Sentinel failover: the promoted replica received the library with
// the replication stream, and calls go on as functions; when the promoted
// node lacks it (it never received it: flushed here), the first call
// loads it there.
func TestLibraryAcrossFailover(t *testing.T) {
	forgetNoFunctions(t)
	d := redistest.StartSentinelT(t, "fn-failover")
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	n := goredis.New(fc)
	ctx := context.Background()
	cycle(t, n, keys("before"), off, Ack{})
	replica := d.Replica.Client()
	t.Cleanup(func() { _ = replica.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !hasLibrary(t, replica) {
		if time.Now().After(deadline) {
			t.Fatal("the replica never received the library")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := d.Master.Client()
	t.Cleanup(func() { _ = promoted.Close() })
	if !hasLibrary(t, promoted) {
		t.Fatal("the promoted replica lacks the library")
	}
	cycleEventually(t, n, keys("after"))
	if err := promoted.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cycleEventually(t, n, keys("flushed"))
	if !hasLibrary(t, promoted) || cmdCalls(t, promoted, "fcall") == 0 || acquireScripted(t, promoted) {
		t.Error("after the failover, the calls did not run as functions on the promoted node")
	}
	// The promoted node's guard: a failover epoch, recovering.
	a, err := Acquire(ctx, n, keys("guarded"), "mine", time.Minute, on, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("guarded acquire on the promoted node: %+v, %v; want recovering", a, err)
	}
}

// cycleEventually runs cycle once the failover client reaches a master
// that takes writes (it may still name the old master for a moment).
func cycleEventually(t *testing.T, n driver.Node, k Keys) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := n.Do(context.Background(), "SET", k.Lock+":probe", "1", "PX", 1000)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writable master after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cycle(t, n, k, off, Ack{})
}

// shardedFailing is a real standalone node that says it is a Cluster
// whose masters cannot be listed: the one way to make the library's load
// fail on the way while the node itself answers (a mock of the listing
// only; every command goes to the real server).
type shardedFailing struct{ driver.Node }

func (n shardedFailing) Info() driver.Info {
	i := n.Node.Info()
	i.Sharded = true
	return i
}

func (shardedFailing) Masters(context.Context) ([]driver.Node, error) {
	return nil, errors.New("masters unreachable")
}

// A load that fails on the way (a master that does not answer) leaves
// the call to EVALSHA, this once: the call works, and the node is not
// remembered as without functions.
func TestLibraryLoadFailsOnTheWay(t *testing.T) {
	forgetNoFunctions(t)
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := shardedFailing{nodeOf(c)}
	k := keys("x")
	ctx := context.Background()
	a, err := Acquire(ctx, n, k, "mine", time.Minute, off, Ack{})
	if err != nil || a.Status != Taken {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	a, err = Acquire(ctx, n, keys("y"), "mine", time.Minute, off, Ack{Replicas: 1, Timeout: 10 * time.Millisecond})
	if err != nil || a.Status != Taken || !a.Unreplicated {
		t.Fatalf("acquire with WAIT: %+v, %v", a, err)
	}
	if r, err := Release(ctx, n, k.Lock, "mine", Retire{Fence: k.Fence, Token: a.Token, Guard: off}, true, false); err != nil || !r.Deleted {
		t.Fatalf("release: %+v, %v", r, err)
	}
	if functionsOff(n) || hasLibrary(t, c) || cmdCalls(t, c, "evalsha") != 3 {
		t.Errorf("functions off %v, library %v, EVALSHA %d; want false, false, 3", functionsOff(n), hasLibrary(t, c), cmdCalls(t, c, "evalsha"))
	}
}
