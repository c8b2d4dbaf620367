package redlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Issue 48, K1: a node restarted with its data recovers from its process
// start, not from its next guarded request, so a quiet deployment's
// rolling restart spaced by more than the max TTL ends with every node
// but the last voting. The nodes keep their data in an AOF with
// appendfsync always; no Client sends anything between the restarts (the
// Clients of these tests keep no configuration records, newClient).

// startAOFNodes starts n nodes that keep every acknowledged write in an AOF.
func startAOFNodes(t *testing.T, n int) *cluster {
	t.Helper()
	cl := &cluster{servers: redistest.Start(t, n, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})}
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cl.clients = append(cl.clients, c)
	}
	return cl
}

// restartWithData kills node i and starts it again from its AOF, and
// returns the time once it answers (no earlier than the new process's
// start). The node's epoch record survives, naming the old process.
func restartWithData(t *testing.T, cl *cluster, i int) time.Time {
	t.Helper()
	if err := cl.servers[i].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[i].Restart(); err != nil {
		t.Fatal(err)
	}
	reachable(t, cl.clients[i])
	up := time.Now()
	if !recordOfAnotherProcess(t, cl.clients[i]) {
		t.Fatalf("node %d: the premise, its epoch record kept from before the restart", i)
	}
	return up
}

// recordOfAnotherProcess reports whether node's epoch record exists and
// names another process than the node's: no guarded request has reached
// it since it restarted or was promoted.
func recordOfAnotherProcess(t *testing.T, node redis.UniversalClient) bool {
	t.Helper()
	ctx := context.Background()
	run, err := node.HGet(ctx, "{"+limits.Prefix+"}:epoch", "run").Result()
	if err != nil {
		return false
	}
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	return !strings.Contains(info, "run_id:"+run)
}

// votesNow reports whether node votes for a guarded Client at once: a
// single-node TryObtain of a name of its own (the guarded request a
// readiness probe makes too). It fails the test on any other refusal.
func votesNow(t *testing.T, node redis.UniversalClient) bool {
	t.Helper()
	ctx := context.Background()
	l, err := guardOn(t, []redis.UniversalClient{node}).TryObtain(ctx, "votes-now", time.Second)
	if err == nil {
		_ = l.Release(ctx)
		return true
	}
	if !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("a single-node TryObtain: %v, want success or ErrNodeRecovering", err)
	}
	return false
}

// quietStep is the wait between two steps of a rollout, from the last
// one's process start: more than the max TTL, plus the 2 s by which the
// guard may place the start late (uptime_in_seconds is the difference of
// two whole-second clocks), plus a margin.
const quietStep = guardMaxTTL + 3*time.Second

// endsVoting checks the end of a rollout whose last step was node last:
// a guarded Client's TryObtain succeeds at once (nodes' is the Client's
// view), and every other node votes at once.
func endsVoting(t *testing.T, cl *cluster, nodes []redis.UniversalClient, last int, stepped time.Time) {
	t.Helper()
	ctx := context.Background()
	l, err := guardOn(t, nodes).TryObtain(ctx, "after-rollout", time.Second)
	if err != nil {
		t.Fatalf("TryObtain right after the rollout: %v", err)
	}
	t.Logf("obtained %v after the last step", time.Since(stepped).Round(time.Millisecond))
	_ = l.Release(ctx)
	for i, n := range nodes {
		if i != last && !votesNow(t, n) {
			t.Errorf("node %d, restarted more than the max TTL ago, does not vote", i)
		}
	}
}

// TestQuietRollingRestartEndsVoting restarts each of 3 nodes in turn, more
// than the max TTL apart, with no request in between: right after the
// last restart a lock is obtained, and the first two nodes vote. Before
// K1's fix each restarted node recovered from the first request after the
// rollout, and TryObtain failed with every node recovering.
func TestQuietRollingRestartEndsVoting(t *testing.T) {
	cl := startAOFNodes(t, 3)
	for _, n := range cl.clients {
		waitVoting(t, n) // writes each node's epoch record
	}
	var at time.Time
	for i := range cl.clients {
		time.Sleep(time.Until(at.Add(quietStep)))
		at = restartWithData(t, cl, i)
	}
	endsVoting(t, cl, cl.clients, 2, at)
}

// TestQuietRollingRestartWithAFailover is the rollout with one node failed
// over to its replica (REPLICAOF NO ONE, and the node's address moved to
// it, as Sentinel or a Service does). A promoted replica's process started
// long before its promotion, so it recovers for the max TTL from the first
// guarded request after it: as the rollout's last step, the others vote;
// in the middle of it, a guarded request right after the promotion (what
// a readiness probe that runs the guard sends) starts that recovery then.
func TestQuietRollingRestartWithAFailover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed int  // the node failed over
		probed bool // a guarded request right after the promotion
	}{
		{"failover last", 2, false},
		{"failover in the middle, probed", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startAOFNodes(t, 3)
			ctx := context.Background()
			replica := redistest.Start(t, 1)[0]
			rc := replica.Client()
			t.Cleanup(func() { _ = rc.Close() })
			moved, target := switchable(t, cl.servers[tc.failed].Addr())
			nodes := append([]redis.UniversalClient(nil), cl.clients...)
			nodes[tc.failed] = moved
			for _, n := range nodes {
				waitVoting(t, n)
			}
			if err := cl.clients[tc.failed].ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", cl.servers[tc.failed].Port()).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the replica has the epoch record", func() bool {
				return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") &&
					rc.Exists(ctx, "{"+limits.Prefix+"}:epoch").Val() == 1
			})
			var at time.Time
			for i := range nodes {
				time.Sleep(time.Until(at.Add(quietStep)))
				if i != tc.failed {
					at = restartWithData(t, cl, i)
					continue
				}
				if err := cl.servers[i].Kill(); err != nil {
					t.Fatal(err)
				}
				if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
				addr := replica.Addr()
				target.Store(&addr)
				reachable(t, moved)
				at = time.Now()
				if !recordOfAnotherProcess(t, moved) {
					t.Fatal("the premise: the promoted replica holds its old master's epoch record")
				}
				if tc.probed && votesNow(t, moved) {
					t.Fatal("a promoted replica votes right after its promotion")
				}
			}
			endsVoting(t, cl, nodes, 2, at)
			if !tc.probed && votesNow(t, moved) {
				t.Error("the promoted replica votes at its first guarded request")
			}
		})
	}
}

// TestRestartRecoversFromItsStart: the recovery from the process start
// still keeps out a lock the node forgot. A holds a lock on nodes 0 and 1
// (node 2 missed it); node 1 restarts from a snapshot taken before, and
// forgets it. C, cut off from node 0, asks nodes 1 and 2, which both lack
// the key: node 1 refuses as recovering until its process start plus the
// max TTL, by when A's lock has expired, and C's token is above A's.
func TestRestartRecoversFromItsStart(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	for _, n := range cl.clients {
		waitVoting(t, n)
	}
	snapshot(t, cl, 1) // the epoch record, without A's lock
	a, err := guardOn(t, cutOff(t, cl.clients, 2, cl.servers[2].Addr())).TryObtain(ctx, "forgotten", guardMaxTTL)
	if err != nil {
		t.Fatalf("A's TryObtain with node 2 cut off: %v", err)
	}
	restarted := time.Now()
	crashFromSnapshot(t, cl, 1)
	if _, ok := rawGet(t, cl.clients[1], "forgotten"); ok || !recordOfAnotherProcess(t, cl.clients[1]) {
		t.Fatal("the premise: node 1 restored its epoch record but not A's lock")
	}
	c := guardOn(t, cutOff(t, cl.clients, 0, cl.servers[0].Addr()))
	for {
		l, err := c.TryObtain(ctx, "forgotten", time.Second)
		if err == nil {
			got := time.Now()
			if got.Before(restarted.Add(guardMaxTTL)) {
				t.Fatalf("C obtained A's forgotten lock %v after node 1's restart, before the max TTL %v", got.Sub(restarted), guardMaxTTL)
			}
			if got.Before(a.ValidUntil()) || l.Token() <= a.Token() {
				t.Fatalf("C's lock (token %d) while A's (token %d) is valid until %v", l.Token(), a.Token(), a.ValidUntil())
			}
			t.Logf("C obtained it %v after the restart (max TTL %v)", got.Sub(restarted).Round(time.Millisecond), guardMaxTTL)
			_ = l.Release(ctx)
			return
		}
		var qe *QuorumError
		if !errors.As(err, &qe) || !slices.ContainsFunc(qe.Nodes, func(n NodeResult) bool { return n.Node == 1 && errors.Is(n.Err, ErrNodeRecovering) }) {
			t.Fatalf("C's TryObtain: %v, want node 1 recovering", err)
		}
		if time.Since(restarted) > 10*guardMaxTTL {
			t.Fatalf("node 1 still recovers %v after its restart", time.Since(restarted))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
