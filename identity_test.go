package redlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// dial is a go-redis client of addr, closed when the test ends.
func dial(t *testing.T, addr string) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func runIDOf(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	s, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(s, "run_id:")
	id, _, _ := strings.Cut(rest, "\r\n")
	return id
}

// TestOneServerTwoAddresses: one redis-server given as two nodes, under
// 127.0.0.1 and localhost, is refused by the Client's first obtain, and
// every obtain of that Client fails with the same error, at once; a set of
// distinct servers is unaffected (issue 38, item 5). The first acquire
// reads each node's identity with its vote (issue 50), counts no vote of
// the server's second address, and gives back what it took: no lock key
// is left, only the lock's fencing counter, which its release retired,
// and with configuration records the record that the acquire's pipeline
// carried before it (docs/reconfiguration.md, "A node's identity"),
// until it expires.
func TestOneServerTwoAddresses(t *testing.T) {
	for _, records := range []bool{true, false} {
		t.Run("records="+strconv.FormatBool(records), func(t *testing.T) {
			servers := redistest.Start(t, 2)
			ctx := context.Background()
			port := strconv.Itoa(servers[0].Port())
			a, b := dial(t, "127.0.0.1:"+port), dial(t, "localhost:"+port)
			c := newClient(t, []redis.UniversalClient{a, b, dial(t, servers[1].Addr())}, WithNodeTimeout(time.Second), WithConfigRecords(records))
			l, err := c.TryObtain(ctx, "dup", 5*time.Second)
			if err == nil {
				_ = l.Release(ctx)
				t.Fatal("one server given twice: obtained")
			}
			want := "nodes 0 (127.0.0.1:" + port + ") and 1 (localhost:" + port + ") are one redis-server process (run_id " + runIDOf(t, a) + ")"
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("TryObtain: %v, want ErrInvalid naming %q", err, want)
			}
			// Every later obtain, of any kind, fails with it at once.
			start := time.Now()
			_, err2 := c.Obtain(ctx, "other", 5*time.Second, WithMaxAttempts(50))
			_, w := c.RWMutex("rw")
			_, err3 := w.Obtain(ctx, 5*time.Second)
			for _, e := range []error{err2, err3} {
				if !errors.Is(e, ErrInvalid) || e.Error() != err.Error() {
					t.Errorf("later obtain: %v, want %v", e, err)
				}
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the refused obtains took %v: they retried", d)
			}
			// No lock on the server: the node's identity, the retired
			// fencing counter, and with records the first record.
			want2 := []string{keys.Layout{Prefix: "redlock:"}.NodeID(), "{redlock:dup}:fence"}
			if records {
				want2 = append(want2, keys.Layout{Prefix: "redlock:"}.Configs())
			}
			slices.Sort(want2)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				ks, err := a.Keys(ctx, "*").Result()
				slices.Sort(ks)
				if err == nil && slices.Equal(ks, want2) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("keys written: %q (%v), want %q", ks, err, want2)
				}
			}
		})
	}

	// Distinct servers: unaffected.
	ctx := context.Background()
	three := redistest.Start(t, 3)
	for _, records := range []bool{true, false} {
		ok := newClient(t, []redis.UniversalClient{dial(t, three[0].Addr()), dial(t, "localhost:"+strconv.Itoa(three[1].Port())), dial(t, three[2].Addr())}, WithConfigRecords(records))
		for range 3 {
			l, err := ok.TryObtain(ctx, "fine", 5*time.Second)
			if err != nil {
				t.Fatalf("distinct servers, records %v: %v", records, err)
			}
			_ = l.Release(ctx)
		}
	}
}

// TestOneServerTwoAddressesLater: a node that did not answer at the first
// contact (with records) or at the first acquire's read (without) is
// identified when it answers, by an acquire that reads its identity with
// its vote, and the Client then refuses the node set.
func TestOneServerTwoAddressesLater(t *testing.T) {
	for _, records := range []bool{true, false} {
		t.Run("records="+strconv.FormatBool(records), func(t *testing.T) {
			servers := redistest.Start(t, 2)
			ctx := context.Background()
			p := proxyTo(t, servers[0].Addr())
			p.SetBlackhole(true)
			c := newClient(t, []redis.UniversalClient{dial(t, servers[0].Addr()), dial(t, p.Addr()), dial(t, servers[1].Addr())},
				WithNodeTimeout(200*time.Millisecond), WithConfigRecords(records))
			// Node 1 does not answer: nodes 0 and 2 make the quorum.
			l, err := c.TryObtain(ctx, "late", 5*time.Second)
			if err != nil {
				t.Fatalf("node 1 silent: %v", err)
			}
			_ = l.Release(ctx)
			p.Heal()
			deadline := time.Now().Add(20 * time.Second)
			for {
				l, err := c.TryObtain(ctx, "late", 5*time.Second)
				if err == nil {
					_ = l.Release(ctx)
				} else if errors.Is(err, ErrInvalid) {
					if !strings.Contains(err.Error(), "nodes 0 (") || !strings.Contains(err.Error(), "and 1 ("+p.Addr()+")") {
						t.Errorf("error: %v", err)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 1 answers, one server with node 0, still not refused: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestOneServerTwoNodesClusterSentinel: a Redis Cluster given twice, by
// the seed address of two different masters, and a Sentinel-managed
// master also given by its own address, are refused too.
func TestOneServerTwoNodesClusterSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a Sentinel deployment")
	}
	ctx := context.Background()
	other := redistest.Start(t, 1)
	t.Run("cluster", func(t *testing.T) {
		rc := redistest.StartClusterT(t, 3)
		seed := func(i int) redis.UniversalClient {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{rc.Servers[i].Addr()}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		c := newClient(t, []redis.UniversalClient{seed(0), seed(1), dial(t, other[0].Addr())}, WithNodeTimeout(time.Second))
		_, err := c.TryObtain(ctx, "cl", 5*time.Second)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nodes 0 (") || !strings.Contains(err.Error(), "are one redis-server process") {
			t.Fatalf("one cluster given twice: %v", err)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		d := redistest.StartSentinelT(t, "ident")
		fc := d.FailoverClient()
		t.Cleanup(func() { _ = fc.Close() })
		c := newClient(t, []redis.UniversalClient{fc, dial(t, d.Master.Addr()), dial(t, other[0].Addr())}, WithNodeTimeout(time.Second))
		_, err := c.TryObtain(ctx, "se", 5*time.Second)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "and 1 ("+d.Master.Addr()+") are one redis-server process (run_id "+runIDOf(t, fc)+")") {
			t.Fatalf("a Sentinel master also given by its address: %v", err)
		}
	})
}

// TestReplicaBesideItsMaster: a replica given as a node beside its master
// has another run_id, but the master's data set, and with it the node's
// identity: the Client refuses the node set (it would count one node's
// votes twice once the replica is promoted, and before that it counts
// the master's writes through the replica's replies).
func TestReplicaBesideItsMaster(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	master, replica := servers[0].Client(), servers[2].Client()
	t.Cleanup(func() { _ = master.Close(); _ = replica.Close() })
	idKey := keys.Layout{Prefix: "redlock:"}.NodeID()
	if _, err := script.Identify(ctx, goredis.New(master), idKey); err != nil {
		t.Fatal(err)
	}
	if err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", servers[0].Port()).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	eventually(t, "the replica has the master's identity", func() bool {
		v, _ := replica.Get(ctx, idKey).Result()
		return v != ""
	})
	c := newClient(t, []redis.UniversalClient{master, dial(t, servers[1].Addr()), replica}, WithNodeTimeout(time.Second))
	_, err := c.TryObtain(ctx, "dup", 5*time.Second)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nodes 0 (") || !strings.Contains(err.Error(), "hold one node identity") {
		t.Fatalf("TryObtain with a replica beside its master: %v, want ErrInvalid naming nodes 0 and 2 as one node identity", err)
	}
}

// TestAddressRepointedAfterFirstContact: an address that reaches another
// node of the set after the Client identified it (a DNS name or a proxy
// pointed elsewhere) never casts that node's vote a second time (issue
// 44: a node is known by its identity). Every script that gives a vote
// checks the identity the Client learned (epoch.lua's node_is): an
// acquire and a refresh are refused there, and the Client, identifying
// the node again, refuses the node set as at a first contact.
func TestAddressRepointedAfterFirstContact(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	p := proxyTo(t, servers[0].Addr())
	direct := make([]redis.UniversalClient, 3)
	for i, s := range servers {
		direct[i] = dial(t, s.Addr())
	}
	c := newClient(t, []redis.UniversalClient{dial(t, p.Addr()), direct[1], direct[2]}, WithNodeTimeout(time.Second))
	other := newClient(t, direct)
	// The first obtain identifies every node; r is held on all three.
	r, err := c.TryObtain(ctx, "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Another Client holds "job" on nodes 0 and 2: node 1 lost its key.
	held, err := other.TryObtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	layout := keys.Layout{Prefix: "redlock:"}
	job, _ := layout.Lock("job")
	if err := direct[1].Del(ctx, job).Err(); err != nil {
		t.Fatal(err)
	}
	// r is another owner's on node 2.
	rKey, _ := layout.Lock("r")
	if err := direct[2].Set(ctx, rKey, "another owner", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// Node 0's address now reaches node 1's server.
	p.SetTarget(servers[1].Addr())
	p.Reset()

	// A refresh has node 1's vote once, not twice: no quorum.
	if err := r.Refresh(ctx, 5*time.Second); err == nil {
		t.Errorf("r refreshed on one server counted as nodes 0 and 1")
	}
	// An acquire of "job" has node 1's vote once: refused, beside its holder.
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := c.TryObtain(ctx, "job", 5*time.Second)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatalf("job obtained beside its holder: node 1's server voted as nodes 0 and 1")
		}
		// Identified again, node 0 is node 1: the node set is refused.
		if errors.Is(err, ErrInvalid) {
			if !strings.Contains(err.Error(), "nodes 0 ("+p.Addr()+") and 1 (") {
				t.Errorf("error: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 0 reaches node 1's server, the node set still not refused: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := held.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("the holder lost job: %v", err)
	}
}

// proxyTo is a faultproxy to target, closed when the test ends.
func proxyTo(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestAcquireReadsANewIdentityAtOnce: without records, a node that lost
// its data set (FLUSHALL: its locks and its identity) refuses a refresh
// under the identity the Client learned, which makes the Client doubt it.
// The next acquire reads the node's new identity in its pipeline, is
// refused under the old one, and is sent once more under the new one:
// the node takes the lock in that round, not a round later.
func TestAcquireReadsANewIdentityAtOnce(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, cl.clients, WithNodeTimeout(2*time.Second))
	l, err := c.TryObtain(ctx, "before", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	eventuallyWithin(t, 10*time.Second, "every node identified", c.e.ident.done.Load)
	if err := cl.clients[2].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Nodes 0 and 1 extend it; node 2 refuses under the old identity,
	// maybe after the refresh's decision.
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, 10*time.Second, "node 2's refusal of the refresh makes the Client doubt its identity", func() bool {
		c.e.ident.mu.Lock()
		defer c.e.ident.mu.Unlock()
		return c.e.ident.ids[2] == nil
	})
	after, err := c.TryObtain(ctx, "after", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Release(ctx) }()
	eventuallyWithin(t, 10*time.Second, "node 2 holds the lock taken after its refusal", func() bool {
		return nodeHolds(t, cl.clients[2], after)
	})
	id, err := cl.clients[2].Get(ctx, keys.Layout{Prefix: "redlock:"}.NodeID()).Result()
	if g := c.e.ident.guard(2); err != nil || g.Node != id {
		t.Fatalf("node 2's guard names %q, the node holds %q (%v)", g.Node, id, err)
	}
}
