// Package drivertest is the conformance suite of redlock's drivers
// (package driver): what every driver must do, checked on real
// redis-server processes that the suite starts on free loopback ports.
// A driver's tests call Run with constructors of its nodes:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Driver{
//			Name:       "mydriver",
//			Standalone: func(t testing.TB, addr string) driver.Node { ... },
//		})
//	}
//
// The suite covers the reply shapes (nil, integers, strings, arrays, RESP3
// maps, booleans and doubles), error replies and their recognition by
// driver.IsReply, EVALSHA falling back to EVAL through redlock's script
// layer, pipelines with an error reply inside, the Notifier (confirmations,
// messages, unsubscription, a broken connection, a restarted server,
// churn, Close), node timeouts and a frozen node (SIGSTOP), refused
// connections, a node named by a host name that comes back on a new IP
// address with its data (AddressChange, where 127.0.0.2 and 127.0.0.3
// can be bound), a node whose name the test's own DNS server resolves,
// its A record changed and the old address a blackhole (Reresolve), Info, Masters and sharded notifications on a Redis Cluster,
// WithReplicaAck on a Redis Cluster with a replica frozen (WAIT reaches the
// master that ran the write), a waiter woken by a release after its lock's
// slot moved to another master of a Redis Cluster,
// a Sentinel deployment and its failover, and redlock Clients over the
// driver obtaining, waiting for a release notification, refreshing and
// releasing, on one and on three nodes.
//
// FIPS140Only runs a lock cycle over the driver in a FIPS 140-only process
// (GODEBUG=fips140=only), from a test binary that must not compute SHA-1
// when it starts.
//
// It needs redis-server (and redis-sentinel for the Sentinel part) on the
// PATH, and SIGSTOP for the frozen node (not on Windows, where that part
// is skipped). The driver's test package should check for leaked
// goroutines (go.uber.org/goleak's VerifyTestMain): the suite closes every
// Client and Notifier it makes, and the constructors' t.Cleanup close the
// clients.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Driver makes the nodes of one driver for the suite. Each constructor
// returns a node configured as the driver's documentation tells users to
// configure it, registers with t.Cleanup whatever closes its client, and
// must not fail when the server is down: the suite stops servers under
// the nodes it made.
type Driver struct {
	// Name names the driver in the suite's messages.
	Name string
	// Standalone returns a node for the redis-server at addr (host:port).
	Standalone func(t testing.TB, addr string) driver.Node
	// Dialing returns a node for the redis-server named addr, a host
	// name and port that no resolver knows, whose driver opens every
	// connection with dial, given the address (the driver's dial option:
	// go-redis's Options.Dialer, rueidis's ClientOption.DialCtxFn,
	// redigo's DialContextFunc). The AddressChange part moves the server
	// to another IP address behind the name; nil skips it.
	Dialing func(t testing.TB, addr string, dial Dialer) driver.Node
	// Cluster returns a node for the Redis Cluster whose masters are at
	// addrs; nil when the driver does not support Redis Cluster.
	Cluster func(t testing.TB, addrs []string) driver.Node
	// Sentinel returns a node for the master that the sentinels at
	// sentinels monitor under the name master; nil when the driver does
	// not support Sentinel.
	Sentinel func(t testing.TB, master string, sentinels []string) driver.Node
}

// patience bounds every wait for something that takes a few milliseconds
// on loopback (a confirmation, a message, a reconnection): far longer, for
// a machine shared by many test processes.
const patience = 10 * time.Second

// Run runs the conformance suite on d, one subtest per part. Parts that
// need what d does not support (Cluster, Sentinel) are skipped with the
// reason.
func Run(t *testing.T, d Driver) {
	if d.Standalone == nil {
		t.Fatal("drivertest: Driver.Standalone is required")
	}
	t.Run("Replies", func(t *testing.T) { testReplies(t, d) })
	t.Run("ErrorReplies", func(t *testing.T) { testErrorReplies(t, d) })
	t.Run("Pipelines", func(t *testing.T) { testPipelines(t, d) })
	t.Run("Scripts", func(t *testing.T) { testScripts(t, d) })
	t.Run("Info", func(t *testing.T) { testInfo(t, d) })
	t.Run("Notifier", func(t *testing.T) { testNotifier(t, d) })
	t.Run("NotifierBrokenConnection", func(t *testing.T) { testNotifierBroken(t, d) })
	t.Run("NotifierServerRestart", func(t *testing.T) { testNotifierRestart(t, d) })
	t.Run("NotifierChurn", func(t *testing.T) { testNotifierChurn(t, d) })
	t.Run("NotifierClose", func(t *testing.T) { testNotifierClose(t, d) })
	t.Run("FrozenNode", func(t *testing.T) { testFrozen(t, d) })
	t.Run("RefusedConnection", func(t *testing.T) { testRefused(t, d) })
	t.Run("AddressChange", func(t *testing.T) {
		if d.Dialing == nil {
			t.Skipf("%s: no Dialing constructor", d.Name)
		}
		testAddressChange(t, d)
	})
	t.Run("Reresolve", func(t *testing.T) {
		if d.Dialing == nil {
			t.Skipf("%s: no Dialing constructor", d.Name)
		}
		testReresolve(t, d)
	})
	t.Run("EndToEnd", func(t *testing.T) {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) { testEndToEnd(t, d, n) })
		}
	})
	t.Run("EndToEndFrozenNode", func(t *testing.T) { testEndToEndFrozen(t, d) })
	t.Run("Cluster", func(t *testing.T) {
		if d.Cluster == nil {
			t.Skipf("%s does not support Redis Cluster", d.Name)
		}
		testCluster(t, d)
	})
	t.Run("ClusterReplicaAck", func(t *testing.T) {
		if d.Cluster == nil {
			t.Skipf("%s does not support Redis Cluster", d.Name)
		}
		testClusterReplicaAck(t, d)
	})
	t.Run("ClusterSlotMigration", func(t *testing.T) {
		if d.Cluster == nil {
			t.Skipf("%s does not support Redis Cluster", d.Name)
		}
		testClusterSlotMigration(t, d)
	})
	t.Run("Sentinel", func(t *testing.T) {
		if d.Sentinel == nil {
			t.Skipf("%s does not support Sentinel", d.Name)
		}
		testSentinel(t, d)
	})
}

// standalone starts a redis-server and returns it with a node of d on it.
func standalone(t *testing.T, d Driver) (*redistest.Server, driver.Node) {
	t.Helper()
	s := redistest.Start(t, 1)[0]
	return s, d.Standalone(t, s.Addr())
}

// unique returns a key or channel name unique in the test process.
func unique(prefix string) string {
	return fmt.Sprintf("drivertest:%s:%d", prefix, seq.Add(1))
}

var seq atomic.Int64

// ctxFor returns a context with a deadline of d, cancelled when the test
// ends.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// must fails the test when err is set.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// do sends one command with patience and fails the test on an error.
func do(t testing.TB, n driver.Node, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	v, err := n.Do(ctx, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// eventually polls cond until it holds, failing the test after limit.
func eventually(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits up to limit for c to be closed or to receive.
func waitFor(c <-chan struct{}, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-c:
		return true
	case <-timer.C:
		return false
	}
}

// isTimeout reports whether err says a deadline passed.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// numsub is PUBSUB NUMSUB of channel on node (SHARDNUMSUB when sharded).
func numsub(t testing.TB, n driver.Node, channel string, sharded bool) int64 {
	t.Helper()
	cmd := "NUMSUB"
	if sharded {
		cmd = "SHARDNUMSUB"
	}
	v := do(t, n, "PUBSUB", cmd, channel)
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		t.Fatalf("PUBSUB %s %s: %#v, want [channel count]", cmd, channel, v)
	}
	c, ok := a[1].(int64)
	if !ok {
		t.Fatalf("PUBSUB %s %s: %#v, want an integer count", cmd, channel, v)
	}
	return c
}

// infoField reads one field of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// canFreeze skips t where processes cannot be frozen.
func canFreeze(t *testing.T) {
	t.Helper()
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
}
