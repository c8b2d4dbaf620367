package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		if v, ok := rawGet(t, master, "sentinel-after"); !ok || v != l.value {
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
	sentinelFailoverGuard(t, "redlock-guard-p", WithTrustedPersistence())
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
	// acquire; the check is trusted for EpochTrust only, so the promoted
	// replica runs its own check, and sees the promotion, if the failover
	// took longer.
	if took := time.Since(lastOnOld); took <= EpochTrust {
		t.Fatalf("failover took %v, within EpochTrust %v: the guard may not see it", took, EpochTrust)
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
