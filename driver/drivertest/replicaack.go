package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// WithReplicaAck on a Redis Cluster node (three masters, one replica
// each): WAIT counts the replicas of the master that ran the write before
// it, on the write's connection. With the replica of the lock's master
// frozen (SIGSTOP), a pipeline of a write and WAIT on the lock's slot
// counts no replica, and every TryObtain with WithReplicaAck fails with
// ErrNotReplicated; with the replica running, the same obtain succeeds. A
// WAIT sent to another master, whose connection wrote nothing, would
// return that master's replica count at once: a false acknowledgement.
func testClusterReplicaAck(t *testing.T, d Driver) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a replica needs SIGSTOP")
	}
	rc := redistest.StartReplicatedClusterT(t, 3)
	n := d.Cluster(t, rc.Addrs())
	ctx := ctxFor(t, 12*patience)

	name := unique("replica-ack")
	lk := lockKey(t, name)
	gc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs()})
	defer func() { _ = gc.Close() }()
	master, err := gc.MasterForKey(ctx, lk)
	must(t, "the master of the lock's slot", err)
	replica := rc.ReplicaOf(master.Options().Addr)
	if replica == nil {
		t.Fatalf("no replica of the lock's master %s", master.Options().Addr)
	}

	// A generous node timeout: a timeout is not what this checks.
	c := newClient(t, []driver.Node{n}, redlock.WithNodeTimeout(2*time.Second), redlock.WithReplicaAck(1, 300*time.Millisecond))
	obtain := func() error {
		l, err := c.TryObtain(ctx, name, 10*time.Second)
		if err == nil {
			must(t, "Release", l.Release(ctx))
		}
		return err
	}
	// With the replica running the acknowledgement comes: what follows
	// can tell a false one from a true one.
	eventually(t, "an obtain acknowledged by the running replica", patience, func() bool { return obtain() == nil })
	wait := func() any {
		t.Helper()
		replies, err := n.Pipe(ctx, [][]any{{"SET", keys.Waiters(lk), "1", "PX", 60000}, {"WAIT", 1, 300}})
		must(t, "Pipe of a write and WAIT", err)
		if replies[0].Err != nil || replies[1].Err != nil {
			t.Fatalf("Pipe of a write and WAIT: %+v", replies)
		}
		return replies[1].Val
	}
	if got := wait(); got != int64(1) {
		t.Fatalf("WAIT after a write, the replica running: %#v, want 1", got)
	}

	// A WAIT after writes to two masters cannot count both: the driver
	// refuses the pipeline (it must not panic, nor pick a master).
	var other string
	for i := 0; other == ""; i++ {
		k := lockKey(t, unique("other-master"))
		m, err := gc.MasterForKey(ctx, k)
		must(t, "the master of another key", err)
		if m.Options().Addr != master.Options().Addr {
			other = k
		}
		if i == 1000 {
			t.Fatal("no key on another master in 1000 names")
		}
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Pipe of writes to two masters and WAIT panicked: %v", r)
			}
		}()
		replies, err := n.Pipe(ctx, [][]any{{"SET", keys.Waiters(lk), "1", "PX", 60000}, {"SET", keys.Waiters(other), "1", "PX", 60000}, {"WAIT", 1, 300}})
		if err == nil {
			t.Errorf("Pipe of writes to two masters and WAIT: %+v, want an error", replies)
		}
	}()

	must(t, "freeze the replica of the lock's master", replica.Pause())
	t.Cleanup(func() { _ = replica.Resume() })
	for i := range 6 {
		if got := wait(); got != int64(0) {
			t.Errorf("WAIT %d after a write, the replica frozen: %#v, want 0", i, got)
		}
	}
	for i := range 6 {
		err := obtain()
		switch {
		case err == nil:
			t.Errorf("TryObtain %d with the replica of the lock's master frozen: acknowledged", i)
		case !errors.Is(err, redlock.ErrNotReplicated):
			t.Errorf("TryObtain %d with the replica of the lock's master frozen: %v, want ErrNotReplicated", i, err)
		}
	}
}
