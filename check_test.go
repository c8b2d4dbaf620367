package redlock

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestAllLockSequencer is finding 8 of issue 46 on real locks: a lock of
// several names has token 0 of its own, and a fence given it fenced
// nothing. The fence refuses it with an error pointing to Parts, whose
// sequencers it accepts.
func TestAllLockSequencer(t *testing.T) {
	cl := startNodes(t, 4)
	c := newClient(t, cl.clients[:3])
	ctx := context.Background()
	l, err := c.All("a", "b").Obtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	store := fence.NewRedis(cl.clients[3])
	err = store.Set(ctx, "res", l.Sequencer(), "v")
	if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "Parts") {
		t.Fatalf("Set with an All lock's own sequencer %+v: %v, want ErrInvalid pointing to Parts", l.Sequencer(), err)
	}
	for _, p := range l.Parts() {
		s := p.Sequencer()
		if s.Lock != p.Name() || s.Kind != string(KindPlain) || s.Token != p.Token() || s.Token <= 0 {
			t.Fatalf("part %q: sequencer %+v", p.Name(), s)
		}
	}
	if err := store.Set(ctx, "res", l.Parts()[0].Sequencer(), "v"); err != nil {
		t.Fatalf("Set with a part's sequencer: %v", err)
	}
}

// checkIs fails the test unless c.Check(s) answers want (and, for Unknown,
// a *QuorumError).
func checkIs(t *testing.T, c *Client, s fence.Sequencer, want fence.Status) error {
	t.Helper()
	got, err := c.Check(context.Background(), s)
	var qe *QuorumError
	switch {
	case got != want:
		t.Fatalf("Check(%v) = %v, %v; want %v", s, got, err, want)
	case want == fence.Unknown && !errors.As(err, &qe):
		t.Fatalf("Check(%v) = %v, %v; want a *QuorumError", s, got, err)
	case want != fence.Unknown && err != nil:
		t.Fatalf("Check(%v) = %v, %v; want no error", s, got, err)
	}
	return err
}

// TestCheck: Client.Check on three real nodes answers Current for the
// lock's latest holder, Superseded after its release, after a takeover
// and for a forged sequencer (another token, above or below, another kind
// or name), and Unknown with no quorum; one node down does not change a
// Current answer.
func TestCheck(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	a, err := c.Mutex("check").Obtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sa := a.Sequencer()
	checkIs(t, c, sa, fence.Current)
	for _, forged := range []fence.Sequencer{
		{Lock: "check", Kind: "plain", Token: sa.Token + 1},
		{Lock: "check", Kind: "plain", Token: sa.Token - 1},
		{Lock: "check", Kind: "plain", Token: math.MaxInt64},
		{Lock: "check", Kind: "write", Token: sa.Token},
		{Lock: "other", Kind: "plain", Token: sa.Token},
	} {
		checkIs(t, c, forged, fence.Superseded)
	}
	t.Run("release", func(t *testing.T) {
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		checkIs(t, c, sa, fence.Superseded)
	})
	var b *Lock
	defer func() { _ = b.Release(ctx) }()
	var sb fence.Sequencer
	t.Run("takeover", func(t *testing.T) {
		old, err := c.Mutex("check").Obtain(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		checkIs(t, c, old.Sequencer(), fence.Current)
		// old stalls past its TTL; b takes the lock over.
		time.Sleep(500 * time.Millisecond)
		b, err = c.Mutex("check").Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sb = b.Sequencer()
		checkIs(t, c, old.Sequencer(), fence.Superseded)
		checkIs(t, c, sb, fence.Current)
	})
	t.Run("no quorum", func(t *testing.T) {
		// A node whose counter is not b's token (a vote that came after
		// the acquire's decision) does not say Current: freeze that one
		// first, if any, and the two that say Current still make a quorum.
		first, second := 2, 1
		for i, n := range cl.clients {
			if v, _ := n.Get(ctx, keys.Fence("{redlock:check}")).Int64(); v != sb.Token {
				first, second = i, (i+1)%3
			}
		}
		cl.pause(t, first)
		checkIs(t, c, sb, fence.Current)
		cl.pause(t, second)
		err := checkIs(t, c, sb, fence.Unknown)
		if !errors.Is(err, ErrNodeTimeout) {
			t.Errorf("Unknown with two nodes frozen: %v, want their timeouts named", err)
		}
		checkIs(t, c, fence.Sequencer{Lock: "check", Kind: "plain", Token: sb.Token + 1}, fence.Unknown)
	})
}

// TestCheckKinds: what Current means for each kind. The writer of a
// read-write lock and a reentrant owner, whose re-entry keeps its token,
// are Current while they hold; a reader, or a semaphore's permit, is
// Superseded once another reader or permit was granted after it.
func TestCheckKinds(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	obtain := func(l Locker) *Lock {
		t.Helper()
		lk, err := l.Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lk.Release(ctx) })
		return lk
	}
	reader, writer := c.RWMutex("rw")
	w := obtain(writer)
	checkIs(t, c, w.Sequencer(), fence.Current)
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	checkIs(t, c, w.Sequencer(), fence.Superseded)
	r1 := obtain(reader)
	checkIs(t, c, r1.Sequencer(), fence.Current)
	r2 := obtain(reader)
	checkIs(t, c, r2.Sequencer(), fence.Current)
	checkIs(t, c, r1.Sequencer(), fence.Superseded)
	checkIs(t, c, fence.Sequencer{Lock: "rw", Kind: "write", Token: r2.Token()}, fence.Superseded)

	o1 := obtain(c.Reentrant("re", "owner-1"))
	o2 := obtain(c.Reentrant("re", "owner-1"))
	if o1.Token() != o2.Token() {
		t.Fatalf("a re-entry's token %d, the owner's %d", o2.Token(), o1.Token())
	}
	checkIs(t, c, o2.Sequencer(), fence.Current)

	p1 := obtain(c.Semaphore("sem", 2))
	checkIs(t, c, p1.Sequencer(), fence.Current)
	p2 := obtain(c.Semaphore("sem", 2))
	checkIs(t, c, p2.Sequencer(), fence.Current)
	if p2.Token() > p1.Token() {
		checkIs(t, c, p1.Sequencer(), fence.Superseded)
	}
}

// TestCheckInvalid: what Check refuses before any I/O.
func TestCheckInvalid(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	for _, s := range []fence.Sequencer{
		{}, fence.Token(5), {Lock: "x", Kind: "plain", Token: -5}, {Lock: "x", Kind: "mutex", Token: 5},
	} {
		if st, err := c.Check(context.Background(), s); st != fence.Unknown || !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%+v) = %v, %v; want Unknown and ErrInvalid", s, st, err)
		}
	}
	var nilCtx context.Context
	if _, err := c.Check(nilCtx, fence.Sequencer{Lock: "x", Kind: "plain", Token: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Check(nil ctx): %v", err)
	}
	_ = c.Close()
	if _, err := c.Check(context.Background(), fence.Sequencer{Lock: "x", Kind: "plain", Token: 5}); !errors.Is(err, ErrClosed) {
		t.Errorf("Check after Close: %v, want ErrClosed", err)
	}
}

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
