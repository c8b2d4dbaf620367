package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Client.Check across the faults of the restart guard (docs/safety.md,
// "Features × faults"): a node that lost its data, a lagging replica
// promoted, one server under two addresses.

// recoveringNodes returns the nodes whose reason in err's *QuorumError
// matches ErrNodeRecovering.
func recoveringNodes(err error) []int {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return nil
	}
	var out []int
	for _, n := range qe.Nodes {
		if errors.Is(n.Err, ErrNodeRecovering) {
			out = append(out, n.Node)
		}
	}
	return out
}

// TestCheckRestartWithoutData: a majority of the nodes restart empty while
// the lock is held. They answer recovering, and Check says Unknown, not
// Superseded: a node that lost its data cannot tell either way. Once their
// recovery is over, the lock's keys are gone there and Check says
// Superseded.
func TestCheckRestartWithoutData(t *testing.T) {
	const maxTTL = 2 * time.Second
	cl := startNodes(t, 3)
	c := guarded(t, cl.clients, maxTTL)
	ctx := context.Background()
	l, err := c.Mutex("restart").Obtain(ctx, maxTTL)
	if err != nil {
		t.Fatal(err)
	}
	checkIs(t, c, l.Sequencer(), fence.Current)
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	err = checkIs(t, c, l.Sequencer(), fence.Unknown)
	if got := recoveringNodes(err); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("Check with nodes 0 and 1 just restarted: %v; want both named recovering", err)
	}
	waitSuperseded(t, c, l.Sequencer(), 10*maxTTL)
}

// TestCheckLaggingReplicaPromoted: the lock's only node fails over to a
// replica whose replication stopped while lock A was held, so that it
// missed A's release and B's acquire on its master. The promoted replica
// holds A's key and A's counter: without the guard (the control) it says A
// is Current, a holder superseded by B. With the guard it recovers from
// the failover and vouches for nothing: Unknown, and Superseded once A's
// key has expired there.
func TestCheckLaggingReplicaPromoted(t *testing.T) {
	const maxTTL = 2 * time.Second
	servers := redistest.Start(t, 2)
	master, replica := servers[0], servers[1]
	ctx := context.Background()
	rc := dial(t, replica.Addr())
	node, target := switchable(t, master.Addr())
	c := guarded(t, []redis.UniversalClient{node}, maxTTL)
	if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", master.Port()).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica's link is up", func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	a, err := c.Mutex("promoted").Obtain(ctx, maxTTL)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica has A's counter", func() bool {
		v, _ := rc.Get(ctx, "{redlock:promoted}:fence").Result()
		return v == strconv.FormatInt(a.Token(), 10)
	})
	// The replica's replication ends here: it misses what follows.
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := c.Mutex("promoted").Obtain(ctx, maxTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx) }()
	checkIs(t, c, a.Sequencer(), fence.Superseded)
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	addr := replica.Addr()
	target.Store(&addr)
	time.Sleep(100 * time.Millisecond) // a failover takes longer than the identity check's trust
	off := newClient(t, []redis.UniversalClient{dial(t, replica.Addr())})
	checkIs(t, off, a.Sequencer(), fence.Current) // the control: the guard off
	var st fence.Status
	for range 5 { // the first request may meet the dead master's connection
		st, err = c.Check(ctx, a.Sequencer())
		if len(recoveringNodes(err)) == 1 {
			break
		}
	}
	if st != fence.Unknown || len(recoveringNodes(err)) != 1 {
		t.Fatalf("Check on the promoted replica: %v, %v; want Unknown, the node recovering", st, err)
	}
	waitSuperseded(t, c, a.Sequencer(), 10*maxTTL)
}

// waitSuperseded polls c.Check(s) until it says Superseded, failing the
// test if it says Current or the time runs out.
func waitSuperseded(t *testing.T, c *Client, s fence.Sequencer, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := c.Check(context.Background(), s)
		if st == fence.Superseded {
			return
		}
		if st == fence.Current || time.Now().After(deadline) {
			t.Fatalf("Check(%v) after the recovery: %v, %v; want Superseded", s, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCheckOneServerTwice: one server given under two addresses would
// count its answer twice; Check refuses the node set, as an obtain does.
func TestCheckOneServerTwice(t *testing.T) {
	two := redistest.Start(t, 2)
	port := strconv.Itoa(two[0].Port())
	c := newClient(t, []redis.UniversalClient{dial(t, "127.0.0.1:"+port), dial(t, "localhost:"+port), dial(t, two[1].Addr())})
	st, err := c.Check(context.Background(), fence.Sequencer{Lock: "twice", Kind: "plain", Token: 5})
	if st != fence.Unknown || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "one redis-server process") {
		t.Fatalf("Check with one server twice: %v, %v; want Unknown and ErrInvalid naming the server", st, err)
	}
}

// TestCheckAfterARestartWithData: the node restarts with its data (its
// append-only file). It recovers and vouches for nothing; once its
// recovery is over, the holder, which kept refreshing, still holds the key
// there, but the counter predates the node's new epoch (below its floor):
// a snapshot may lack a later token, so the node says it no longer knows
// the token, and Check answers Unknown, never Current.
//
// The restart is real: the recovery runs from the process start
// (epoch.lua), which a test cannot play by rewriting the epoch record. The
// max TTL, the recovery's length, is 3 s, so that the Check right after
// the restart falls inside it on a loaded machine.
func TestCheckAfterARestartWithData(t *testing.T) {
	const maxTTL = 3 * time.Second
	s := redistest.Start(t, 1, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})[0]
	rc := s.Client()
	t.Cleanup(func() { _ = rc.Close() })
	// A node timeout of a second, not the max TTL's eighth: the test
	// checks what the node says, and a loaded machine can be slow to
	// answer.
	c := guarded(t, []redis.UniversalClient{rc}, maxTTL, WithNodeTimeout(time.Second))
	ctx := context.Background()
	l, err := c.Mutex("snapshot").Obtain(ctx, maxTTL, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	checkIs(t, c, l.Sequencer(), fence.Current)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := checkIs(t, c, l.Sequencer(), fence.Unknown); len(recoveringNodes(err)) != 1 {
		t.Fatalf("Check right after the restart: %v; want the node recovering", err)
	}
	// The recovery ends max TTL after the process start, which the node
	// knows to the second: poll until it says more than "recovering".
	deadline := time.Now().Add(10 * maxTTL)
	for {
		time.Sleep(100 * time.Millisecond)
		st, err := c.Check(ctx, l.Sequencer())
		if st != fence.Unknown || !errors.Is(err, ErrNodeRecovering) && !errors.Is(err, errCheckForgotten) {
			t.Fatalf("Check after the restart: %v, %v; want Unknown, the node recovering or saying it no longer knows the token", st, err)
		}
		if errors.Is(err, errCheckForgotten) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node still recovers %v after its restart: %v", 10*maxTTL, err)
		}
	}
	if l.Err() != nil {
		t.Fatalf("the holder lost its lock: %v", l.Err())
	}
}
