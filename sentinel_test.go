package redlock

import (
	"context"
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
