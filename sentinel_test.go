package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestSentinelNode uses a Sentinel-managed master as a single node: locks
// work through a failover client, and keep working once it has followed a
// failover to the promoted replica.
func TestSentinelNode(t *testing.T) {
	start := time.Now()
	d := redistest.StartSentinelT(t, "redlock-test")
	t.Logf("sentinel deployment up in %v", time.Since(start).Round(time.Millisecond))
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	c := newClient(t, []redis.UniversalClient{fc}, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()

	lock, err := c.TryObtain(ctx, "sentinel", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	if err := lock.Refresh(ctx, 20*time.Second); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	promoted := d.Replica.Addr()
	start = time.Now()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", promoted, time.Since(start).Round(time.Millisecond))
	if got := d.Master.Addr(); got != promoted {
		t.Fatalf("Master after Failover is %s, want the promoted replica %s", got, promoted)
	}
	if addr, err := d.MasterAddr(ctx); err != nil || addr != promoted {
		t.Fatalf("MasterAddr = %q, %v; want %s", addr, err, promoted)
	}

	// The failover client learns of the new master from the sentinels'
	// +switch-master message and until then may still write to the old one,
	// which stays a master until the sentinels demote it: poll until a lock
	// lands on the new master.
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	var after *Lock
	start = time.Now()
	eventually(t, "a lock is obtained on the new master", func() bool {
		l, err := c.TryObtain(ctx, "sentinel-after", 10*time.Second)
		if err != nil {
			return false
		}
		if v, ok := rawGet(t, master, "sentinel-after"); !ok || v != l.secret.id {
			_ = l.Release(ctx)
			return false
		}
		after = l
		return true
	})
	t.Logf("first lock after failover obtained %v after it", time.Since(start).Round(time.Millisecond))
	if err := after.Release(ctx); err != nil {
		t.Fatalf("Release after failover: %v", err)
	}
	if _, ok := rawGet(t, master, "sentinel-after"); ok {
		t.Error("the new master still has the key after Release")
	}
}

// The restart guard and WithReplicaAck on a Sentinel-managed node: a vote
// the replica did not acknowledge is refused; after a failover the promoted
// replica, which holds a copy of its old master's epoch record, answers
// "recovering" for the recovery window; then tokens go on increasing.
func TestSentinelFailoverGuard(t *testing.T) {
	sentinelFailoverGuard(t, "redlock-guard")
}

// The same with WithTrustedPersistence (review finding 3): trusting
// persistence spares a restart that kept its data the recovery, not a
// promotion, since the promoted replica may lack its old master's latest
// locks. (epoch.lua before 7155e55 skipped the recovery on any change of
// run_id in this mode, promotions included: the promoted replica voted at
// once.)
func TestSentinelFailoverGuardTrustedPersistence(t *testing.T) {
	sentinelFailoverGuard(t, "redlock-guard-p", WithRestartGuard(GuardTrustPersistence))
}

// sentinelFailoverGuard runs the failover guard scenario on a new Sentinel
// deployment named name, with guard opts given to every client.
func sentinelFailoverGuard(t *testing.T, name string, opts ...Option) {
	const maxTTL = 2 * time.Second
	d := redistest.StartSentinelT(t, name)
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	node := []redis.UniversalClient{fc}
	with := func(o ...Option) []Option { return append(o, opts...) }
	c := guarded(t, node, maxTTL, with(WithNodeTimeout(500*time.Millisecond))...)
	acked := guarded(t, node, maxTTL, with(WithNodeTimeout(500*time.Millisecond), WithReplicaAck(1, 200*time.Millisecond))...)
	ctx := context.Background()

	before, err := acked.TryObtain(ctx, "failover", time.Second)
	if err != nil {
		t.Fatalf("TryObtain with a replica acknowledging: %v", err)
	}
	_ = before.Release(ctx)

	// A replica that does not answer cannot acknowledge: the vote is refused
	// and the key taken on the master is given back.
	if err := d.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = acked.TryObtain(ctx, "unacked", time.Second)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("TryObtain with the replica frozen: %v, want ErrNotReplicated", err)
	}
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	if _, ok := rawGet(t, master, "unacked"); ok {
		t.Fatal("the master kept the key of a vote the replica did not acknowledge")
	}
	if err := d.Replica.Resume(); err != nil {
		t.Fatal(err)
	}
	// The token so far, and the epoch record, reach the replica.
	if err := master.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	// The replica's copy of the epoch record is that of the old master's
	// last acquire, all before this (nothing runs there while the lock is
	// free), and is frozen by the promotion.
	lastOnOld := time.Now()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// That copy says the identity was checked at the old master's last
	// acquire; the check is trusted for limits.EpochTrust only, so the promoted
	// replica runs its own check, and sees the promotion, if the failover
	// took longer.
	if took := time.Since(lastOnOld); took <= limits.EpochTrust {
		t.Fatalf("failover took %v, within limits.EpochTrust %v: the guard may not see it", took, limits.EpochTrust)
	}
	// Once the failover client follows the promoted replica, it answers
	// recovering (the old master, until the sentinels demote it, may still
	// answer normally: retry).
	eventually(t, "the promoted replica answers recovering", func() bool {
		l, err := c.TryObtain(ctx, "failover", time.Second)
		if err == nil {
			_ = l.Release(ctx)
			return false
		}
		return errors.Is(err, ErrNodeRecovering)
	})
	wctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	after, err := c.Obtain(wctx, "failover", time.Second)
	if err != nil {
		t.Fatalf("Obtain after the recovery window: %v", err)
	}
	if after.Token() <= before.Token() {
		t.Fatalf("token %d after the failover, %d before: want larger", after.Token(), before.Token())
	}
	_ = after.Release(ctx)
}

// TestSentinelFamily runs the lock family on a Sentinel-managed master
// with the restart guard, before and after a failover: a reentrant owner
// re-enters through a second Client with its token, readers share the
// lock and keep a writer out; after the failover the promoted replica
// answers recovering, then the owner's next tenure gets a larger token,
// and readers and a writer go on in token order on the new master.
func TestSentinelFamily(t *testing.T) {
	const maxTTL = 2 * time.Second
	d := redistest.StartSentinelT(t, "redlock-family")
	fc := d.FailoverClient()
	t.Cleanup(func() { _ = fc.Close() })
	node := []redis.UniversalClient{fc}
	c := guarded(t, node, maxTTL, WithNodeTimeout(500*time.Millisecond))
	c2 := guarded(t, node, maxTTL, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	const ttl = time.Second
	key := "{" + limits.Prefix + "job}"

	// reentrant: the owner's hold on c, a re-entry on c2 with its token,
	// a reader and another owner refused; both released. It returns the
	// token.
	reentrant := func(obtain func() (*Lock, error)) int64 {
		t.Helper()
		outer, err := obtain()
		if err != nil {
			t.Fatalf("owner: %v", err)
		}
		inner, err := c2.Reentrant("job", "job-1").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("re-entry through another Client: %v", err)
		}
		if inner.Token() != outer.Token() {
			t.Fatalf("re-entry's token %d, the owner's %d: want equal", inner.Token(), outer.Token())
		}
		if _, err := reader(c, "job").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("a reader while the owner holds: %v, want ErrNotObtained", err)
		}
		if _, err := c.Reentrant("job", "job-2").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("another owner while the owner holds: %v, want ErrNotObtained", err)
		}
		if err := inner.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := outer.Refresh(ctx, ttl); err != nil {
			t.Fatalf("the owner's hold after the inner release: %v", err)
		}
		if err := outer.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return outer.Token()
	}
	// readWrite: two readers share the lock and keep a writer out, then
	// the writer gets it with a larger token. It returns the writer's.
	readWrite := func(after int64) int64 {
		t.Helper()
		// The other owner refused above left its wait mark (for its TTL):
		// the first reader waits behind it.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r1, err := reader(c, "job").Obtain(rctx, ttl)
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		r2, err := reader(c2, "job").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("second reader: %v", err)
		}
		if min(r1.Token(), r2.Token()) <= after {
			t.Fatalf("readers' tokens %d, %d after a hold with %d: want larger", r1.Token(), r2.Token(), after)
		}
		if _, err := writer(c, "job").TryObtain(ctx, ttl); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("a writer while readers hold: %v, want ErrNotObtained", err)
		}
		_ = r1.Release(ctx)
		_ = r2.Release(ctx)
		w, err := writer(c, "job").TryObtain(ctx, ttl)
		if err != nil {
			t.Fatalf("writer after the readers: %v", err)
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Fatalf("writer's token %d, readers' %d, %d: want larger", w.Token(), r1.Token(), r2.Token())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return w.Token()
	}

	before := reentrant(func() (*Lock, error) { return c.Reentrant("job", "job-1").TryObtain(ctx, ttl) })
	last := readWrite(before)
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	if err := master.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	promoted := d.Replica.Addr()
	if err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	newMaster := d.Master.Client()
	t.Cleanup(func() { _ = newMaster.Close() })
	if got := d.Master.Addr(); got != promoted {
		t.Fatalf("Master after Failover is %s, want %s", got, promoted)
	}
	// Once the failover client follows the promoted replica, a family
	// obtain is refused: the node recovers (the old master, until the
	// sentinels demote it, may still answer normally: retry).
	eventually(t, "the promoted replica answers recovering", func() bool {
		l, err := c.Reentrant("job", "job-1").TryObtain(ctx, ttl)
		if err == nil {
			_ = l.Release(ctx)
			return false
		}
		return errors.Is(err, ErrNodeRecovering)
	})
	wctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	var onNew bool
	after := reentrant(func() (*Lock, error) {
		l, err := c.Reentrant("job", "job-1").Obtain(wctx, ttl)
		if err == nil {
			mode, _ := newMaster.HGet(ctx, key, "mode").Result()
			owner, _ := newMaster.HGet(ctx, key, "o").Result()
			onNew = mode == "w" && owner == "job-1"
		}
		return l, err
	})
	if !onNew {
		t.Fatal("the owner's hold after the failover is not on the promoted replica")
	}
	if after <= last {
		t.Fatalf("the owner's token %d after the failover, %d before: want larger", after, last)
	}
	readWrite(after)
	if n, err := newMaster.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("the lock's key on the new master after every release: %d, %v", n, err)
	}
}
