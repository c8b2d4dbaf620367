package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// WithReplicaAck on a go-redis Ring node of two shards, each a master with
// one replica: with the replica of the lock's shard frozen (SIGSTOP), every
// TryObtain fails with ErrNotReplicated, and with it running the obtain is
// acknowledged.
func TestRingReplicaAck(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a replica needs SIGSTOP")
	}
	// Without repl-diskless-sync-delay 0 a master waits 5 s before the
	// first sync.
	masters := redistest.Start(t, 2, redistest.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	replicas := make([]*redistest.Server, len(masters))
	for i, m := range masters {
		replicas[i] = redistest.Start(t, 1, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(m.Port()), "--repl-diskless-sync-delay", "0"}})[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Replication runs once the master sees its replica online.
	for i, m := range masters {
		mc := m.Client()
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := mc.Info(ctx, "replication").Result()
			if err == nil && strings.Contains(info, fmt.Sprintf("port=%d,state=online", replicas[i].Port())) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("master %d does not see its replica online: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = mc.Close()
	}
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"a": masters[0].Addr(), "b": masters[1].Addr()},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = ring.Close() })

	// The shard that go-redis's Ring pipeline sends a keyless WAIT to: it
	// picks one at random (ringSharding.Random), which here has been the
	// same shard every time. The lock's name is chosen so that its key is
	// on another shard, whose connection wrote nothing and whose replica
	// runs.
	waits := func(m *redistest.Server) int {
		mc := m.Client()
		defer func() { _ = mc.Close() }()
		stats, err := mc.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(stats, "cmdstat_wait:calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
		return n
	}
	for range 4 {
		if _, err := ring.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Do(ctx, "WAIT", 0, 0).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	waitShard := masters[0].Addr()
	if waits(masters[1]) > waits(masters[0]) {
		waitShard = masters[1].Addr()
	}
	var name, lk string
	var shard *redis.Client
	var err error
	for i := 0; shard == nil || shard.Options().Addr == waitShard; i++ {
		if i == 1000 {
			t.Fatalf("every name's key is on the shard %s", waitShard)
		}
		name = fmt.Sprintf("ring-ack-%d", i)
		if lk, err = (keys.Layout{Prefix: limits.Prefix}).Lock(name); err != nil {
			t.Fatal(err)
		}
		if shard, err = ring.GetShardClientForKey(lk); err != nil {
			t.Fatal(err)
		}
	}
	var frozen *redistest.Server
	for i, m := range masters {
		if m.Addr() == shard.Options().Addr {
			frozen = replicas[i]
		}
	}

	c, err := redlock.NewFromNodes([]driver.Node{goredis.New(ring)},
		redlock.WithNodeTimeout(2*time.Second), redlock.WithRestartGuard(redlock.GuardOff),
		redlock.WithReplicaAck(1, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	obtain := func() error {
		l, err := c.TryObtain(ctx, name, 10*time.Second)
		if err == nil {
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		return err
	}
	// With the replicas running the acknowledgement comes (a first WAIT
	// may miss 300 ms on a loaded machine): what follows can tell a false
	// one from a true one.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := obtain()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TryObtain with the replicas running: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.Resume() })
	for i := range 6 {
		err := obtain()
		switch {
		case err == nil:
			t.Errorf("TryObtain %d with the replica of the lock's shard frozen: acknowledged", i)
		case !errors.Is(err, redlock.ErrNotReplicated):
			t.Errorf("TryObtain %d with the replica of the lock's shard frozen: %v, want ErrNotReplicated", i, err)
		}
	}
}

// A lock on either shard of a go-redis Ring. The node's identity
// ({PREFIX}:id) is on one shard, and a lock's keys may be on the other,
// so the identity is checked at the first contact only, as on a Redis
// Cluster (driver.Info.Spread): when every vote checked it, every lock on
// the other shard was refused as on a server with no identity (4 of 10
// names, go-redis v9.23.0). And each acquire (an FCALL) must reach the
// shard of its lock's key (newCmd: with go-redis v9.16.0 a Release then
// found its lock not held, the acquire having gone to another shard).
func TestRingLocksOnEveryShard(t *testing.T) {
	masters := redistest.Start(t, 2)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"a": masters[0].Addr(), "b": masters[1].Addr()},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = ring.Close() })
	ctx := context.Background()
	c, err := redlock.NewFromNodes([]driver.Node{goredis.New(ring)},
		redlock.WithNodeTimeout(2*time.Second), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	idShard, err := ring.GetShardClientForKey(keys.Layout{Prefix: limits.Prefix}.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	onShard := map[bool]int{} // locks obtained, by whether on the identity's shard
	for i := 0; onShard[true] < 3 || onShard[false] < 3; i++ {
		if i == 1000 {
			t.Fatalf("locks obtained by whether on the identity's shard: %v", onShard)
		}
		name := fmt.Sprintf("ring-shard-%d", i)
		lk, err := (keys.Layout{Prefix: limits.Prefix}).Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		shard, err := ring.GetShardClientForKey(lk)
		if err != nil {
			t.Fatal(err)
		}
		same := shard.Options().Addr == idShard.Options().Addr
		if onShard[same] >= 3 {
			continue
		}
		l, err := c.TryObtain(ctx, name, 10*time.Second)
		if err != nil {
			t.Fatalf("TryObtain %s (its key on the identity's shard: %v): %v", name, same, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %s (its key on the identity's shard: %v): %v", name, same, err)
		}
		onShard[same]++
	}
	if n, err := idShard.Exists(ctx, keys.Layout{Prefix: limits.Prefix}.NodeID()).Result(); err != nil || n != 1 {
		t.Fatalf("the identity's shard has no identity (%d, %v): the first contact did not read it", n, err)
	}
}
