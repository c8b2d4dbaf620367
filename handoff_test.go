package redlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// A handoff's mode must be its kind's: a reader's form that says it is a
// writer, or a plain lock's that names a mode, is refused before any I/O;
// the forms as Handoff writes them resume.
func TestResumeChecksTheMode(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	for _, tc := range []struct {
		handle Locker
		mode   string // the form's mode as Handoff writes it
		forged string // another mode, refused
	}{
		{c.Mutex("mode:plain"), "", "r"},
		{reader(c, "mode:rw"), "r", "w"},
		{c.Reentrant("mode:owned", "job-1"), "w", "r"},
		{c.Semaphore("mode:sem", 2), "s", "w"},
	} {
		l, err := tc.handle.Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		data, err := l.Handoff()
		if err != nil {
			t.Fatal(err)
		}
		var form map[string]any
		if err := json.Unmarshal(data, &form); err != nil {
			t.Fatal(err)
		}
		if got, _ := form["mode"].(string); got != tc.mode {
			t.Errorf("%s: the form's mode is %q, want %q", form["kind"], got, tc.mode)
		}
		form["mode"] = tc.forged
		forged, _ := json.Marshal(form)
		if _, err := c.Resume(ctx, forged); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Resume of a form of mode %q: %v, want ErrInvalid", form["kind"], tc.forged, err)
		}
		l, err = c.Resume(ctx, data)
		if err != nil {
			t.Fatalf("%s: Resume of the form as written: %v", form["kind"], err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// resumeKinds are the handles of TestResumeOnce and
// TestResumeRefusesAnotherKind: one of each kind a form can hold, and a
// contender that the handed lock keeps out (nil for a reader, whose
// contender is a writer).
func resumeKinds(c *Client, name string) []struct {
	label  string
	handle Locker
	rival  func(c *Client) Locker
} {
	return []struct {
		label  string
		handle Locker
		rival  func(c *Client) Locker
	}{
		{"plain", c.Mutex(name + ":plain"), func(c *Client) Locker { return c.Mutex(name + ":plain") }},
		{"reentrant", c.Reentrant(name+":owned", "job-1"), func(c *Client) Locker { return c.Reentrant(name+":owned", "job-2") }},
		{"write", writer(c, name+":w"), func(c *Client) Locker { return writer(c, name+":w") }},
		{"read", reader(c, name+":r"), func(c *Client) Locker { return writer(c, name+":r") }},
		{"permit", c.Semaphore(name+":sem", 1), func(c *Client) Locker { return c.Semaphore(name+":sem", 1) }},
	}
}

// Finding 2 of issue 33: a form delivered twice is resumed once. The
// second Resume fails with ErrNotHeld and returns no lock; the first
// worker keeps the lock past its TTL, and once it releases, another Client
// obtains the name and nothing re-creates the key.
func TestResumeOnce(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	sched := newClient(t, cl.clients)
	w1 := newClient(t, cl.clients)
	w2 := newClient(t, cl.clients)
	other := newClient(t, cl.clients)
	for _, k := range resumeKinds(sched, "once") {
		t.Run(k.label, func(t *testing.T) {
			l, err := k.handle.Obtain(ctx, time.Second, WithAutoRefresh())
			if err != nil {
				t.Fatal(err)
			}
			form, err := l.Handoff()
			if err != nil {
				t.Fatal(err)
			}
			first, err := w1.Resume(ctx, form, WithAutoRefresh())
			if err != nil {
				t.Fatalf("first Resume: %v", err)
			}
			second, err := w2.Resume(ctx, form, WithAutoRefresh())
			if !errors.Is(err, ErrNotHeld) || second != nil {
				if second != nil {
					_ = second.Release(ctx)
				}
				t.Fatalf("second Resume of the same form: %v, want ErrNotHeld and no lock", err)
			}
			if !strings.Contains(err.Error(), "resumed already") {
				t.Errorf("second Resume's error does not say the form was resumed: %v", err)
			}
			// A third delivery, after the first worker refreshed past the
			// lock's TTL: still refused.
			time.Sleep(1500 * time.Millisecond)
			if err := first.Err(); err != nil {
				t.Fatalf("the first worker lost the lock: %v", err)
			}
			if _, err := w2.Resume(ctx, form); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("a third Resume: %v, want ErrNotHeld", err)
			}
			if _, err := k.rival(other).TryObtain(ctx, time.Second); !errors.Is(err, ErrHeld) {
				t.Fatalf("another owner while the first worker holds: %v, want ErrHeld", err)
			}
			if err := first.Release(ctx); err != nil {
				t.Fatalf("the first worker's release: %v", err)
			}
			o, err := k.rival(other).TryObtain(ctx, time.Second)
			if err != nil {
				t.Fatalf("another Client after the worker's release: %v", err)
			}
			if err := o.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Nothing brings the key back: no refresh holds the form's
			// secret or the refused workers'.
			time.Sleep(1200 * time.Millisecond)
			for i, n := range cl.clients {
				if v, err := n.Exists(ctx, l.keys.key).Result(); err != nil || v != 0 {
					t.Fatalf("node %d: the lock key exists after every holder released (%d, %v)", i, v, err)
				}
			}
		})
	}
}

// A claim that reached a minority only (a rival Resume of the same form
// claimed node 0 first): the worker that claims the other nodes wins, the
// rival's claim on node 0 holds nothing, a later Resume fails, and the
// winner releases the lock.
func TestResumePartialClaim(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	sched := newClient(t, cl.clients)
	w1 := newClient(t, cl.clients)
	// The nodes' fencing counters agree, as they do once a name is in use:
	// on a name's first use each node seeds its counter from its own
	// clock, and a node whose vote came after the acquire was decided can
	// hold a counter above the token, where a claim is refused
	// (docs/handoff.md, "The fencing token"); the worker needs both nodes
	// the rival leaves it.
	fence := keys.Fence("{" + limits.Prefix + "partial}")
	for _, n := range cl.clients {
		if err := n.Set(ctx, fence, "1000", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := sched.Mutex("partial").Obtain(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.keys.fence() != fence || l.Token() != 1001 {
		t.Fatalf("the lock's counter is %s, its token %d; want %s and 1001", l.keys.fence(), l.Token(), fence)
	}
	// The obtain returns at a quorum: its acquire may reach node 0 after
	// the rival's claim below, which then finds nothing to claim there.
	eventually(t, "node 0 holds the lock", func() bool {
		_, ok := rawGet(t, cl.clients[0], "partial")
		return ok
	})
	form, err := l.Handoff()
	if err != nil {
		t.Fatal(err)
	}
	// The rival's claim, on node 0 alone.
	rival := script.ClaimCall(l.keys.fenced(l.e, 0, l.keys.fence()), nil, l.secret.id, newValue(), l.token, l.e.ident.guard(0))
	if c, err := rival.Claim(ctx, sched.e.nodes[0].Conn); err != nil || c.Status != script.Claimed {
		t.Fatalf("the rival's claim on node 0: %+v, %v", c, err)
	}
	first, err := w1.Resume(ctx, form)
	if err != nil {
		t.Fatalf("Resume with a rival's claim on one node of three: %v", err)
	}
	var qe *QuorumError
	if _, err := w1.Resume(ctx, form); !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || len(qe.Nodes) != 3 {
		t.Fatalf("a later Resume: %v, want ErrNotHeld from every node", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("the winner's release: %v", err)
	}
	for i := 1; i < 3; i++ {
		if _, ok := rawGet(t, cl.clients[i], "partial"); ok {
			t.Fatalf("node %d still holds the lock after the winner's release", i)
		}
	}
}

// Finding 3 of issue 33: Resume checks the kind on the nodes. A form
// edited to another kind that agrees with itself (a reader's that says
// writer, a plain lock's that says reader, a writer's with another owner,
// a permit's with another number of permits) is refused with ErrWrongKind
// and changes nothing: the form as written resumes afterwards.
func TestResumeRefusesAnotherKind(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, cl.clients)
	edits := map[string][]func(f *handoffForm){
		"plain":     {func(f *handoffForm) { f.Kind, f.Mode = "read", "r" }, func(f *handoffForm) { f.Kind, f.Mode, f.Permits = "permit", "s", 1 }},
		"reentrant": {func(f *handoffForm) { f.Owner = "job-2" }, func(f *handoffForm) { f.Kind, f.Mode, f.Owner = "read", "r", "" }},
		"write":     {func(f *handoffForm) { f.Owner = newValue() }, func(f *handoffForm) { f.Kind, f.Mode, f.Owner = "plain", "", "" }},
		"read":      {func(f *handoffForm) { f.Kind, f.Mode, f.Owner = "write", "w", newValue() }, func(f *handoffForm) { f.Kind, f.Mode, f.Permits = "permit", "s", 1 }},
		"permit":    {func(f *handoffForm) { f.Permits = 2 }, func(f *handoffForm) { f.Kind, f.Mode, f.Permits = "read", "r", 0 }},
	}
	for _, k := range resumeKinds(c, "kind") {
		t.Run(k.label, func(t *testing.T) {
			l, err := k.handle.Obtain(ctx, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			data, err := l.Handoff()
			if err != nil {
				t.Fatal(err)
			}
			for i, edit := range edits[k.label] {
				var f handoffForm
				if err := json.Unmarshal(data, &f); err != nil {
					t.Fatal(err)
				}
				edit(&f)
				forged, _ := json.Marshal(f)
				got, err := c.Resume(ctx, forged)
				if !errors.Is(err, ErrWrongKind) {
					if got != nil {
						_ = got.Release(ctx)
					}
					t.Fatalf("edit %d (kind %q, mode %q, %d permits): %v, want ErrWrongKind", i, f.Kind, f.Mode, f.Permits, err)
				}
			}
			got, err := c.Resume(ctx, data)
			if err != nil {
				t.Fatalf("the form as written, after the refused edits: %v", err)
			}
			if err := got.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lateRefresh sends l's refresh to every node now, with l's secret and
// the token token: what a refresh of the handing Client, sent before
// Handoff and delayed in the network, does when it finally runs (the Lock
// itself sends nothing after Handoff). With l's own token it is this
// version's; with math.MaxInt64, above every counter, it re-seeds as a
// Client of a version before issue 44 did, whose refresh carried no token.
// It reports what each node did.
func lateRefresh(t *testing.T, l *Lock, token int64) []script.RefreshResult {
	t.Helper()
	e := l.e
	var out []script.RefreshResult
	for i, n := range e.nodes {
		r, err := l.sp.kind.refresh(l.keys.fenced(e, i, l.keys.fence()), &l.secret, token, l.ttl).Run(context.Background(), n.Conn, e.ident.guard(i))
		if err != nil {
			t.Fatalf("node %d: the late refresh: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

// waitGone waits until no node holds l's key (its TTL ran out, or a
// release reached every node).
func waitGone(t *testing.T, cl *cluster, l *Lock) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range cl.clients {
		for {
			v, err := n.Exists(context.Background(), l.keys.key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if v == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the handed lock's key did not expire")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// The gap of the fencing token (docs/handoff.md, "The fencing token"): the
// handed lock expires, another Client holds the name and releases it, and
// only then do the handing Client's refreshes, delayed in the network,
// re-create the lock with the form's secret on every node. Resuming the
// form then would continue a tenure that ended before the other holder's,
// with a token below its token. Resume refuses: each node holds the
// secret, but its fencing counter holds the later holder's token. Without
// the other holder in between, the same re-created lock resumes (nobody
// drew a token since), and a permit of a semaphore of two resumes beside
// another permit taken after it (its counter is not checked).
func TestResumeAfterALaterHolder(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	sched := newClient(t, cl.clients)
	w := newClient(t, cl.clients)
	// A second per node: the later holder's vote or release must reach
	// every node (below), also on a loaded machine.
	other := newClient(t, cl.clients, WithNodeTimeout(time.Second))
	const ttl = 1500 * time.Millisecond
	for _, k := range resumeKinds(sched, "later") {
		t.Run(k.label, func(t *testing.T) {
			for _, between := range []bool{true, false} {
				l, err := k.handle.Obtain(ctx, ttl)
				if err != nil {
					t.Fatal(err)
				}
				form, err := l.Handoff()
				if err != nil {
					t.Fatal(err)
				}
				waitGone(t, cl, l)
				if between {
					o, err := k.rival(other).Obtain(ctx, ttl)
					if err != nil {
						t.Fatalf("another Client after the handed lock expired: %v", err)
					}
					if o.Token() <= l.Token() {
						t.Fatalf("the later holder's token %d is not above the form's %d", o.Token(), l.Token())
					}
					if err := o.Release(ctx); err != nil {
						t.Fatal(err)
					}
					// The later holder's acquire was decided by a quorum: its
					// request to a node may even be written after the
					// release, and take the key there until its clean-up
					// (seen beside two busy loops: the late refresh below
					// then met another owner). Wait until it has ended.
					eventually(t, "the later holder has no request in flight", func() bool {
						for _, n := range other.e.nodes {
							if n.InFlight() != 0 {
								return false
							}
						}
						return true
					})
					// Release answers once a quorum deleted the key; the
					// late refresh comes after every node did, and after
					// the later holder's vote or release put every node's
					// counter past the form's token (a node that its
					// acquire and release both missed, in a round decided
					// without it, re-seeds: a minority, which the claim
					// below refuses; a CI run beside busy loops saw one).
					waitGone(t, cl, l)
					for i, n := range cl.clients {
						eventually(t, fmt.Sprintf("node %d's counter past the form's token", i), func() bool {
							v, err := n.Get(ctx, l.keys.fence()).Int64()
							return err == nil && v > l.Token()
						})
					}
				}
				if between {
					// The other holder's release retired the form's token:
					// this version's late refresh re-creates nothing.
					for i, r := range lateRefresh(t, l, l.Token()) {
						if r != script.Retired {
							t.Fatalf("node %d: the late refresh after another holder did %v, want Retired", i, r)
						}
					}
				}
				// Re-created as a Client before issue 44 does it: this
				// version's refresh does not re-seed where a later holder's
				// vote or release put the counter past the form's token
				// (nor on a node whose counter was ahead of it), and the
				// claim's own check must refuse the re-created lock.
				for i, r := range lateRefresh(t, l, math.MaxInt64) {
					if r != script.Reseeded {
						t.Fatalf("node %d: the late refresh did %v, want a re-seed", i, r)
					}
				}
				got, err := w.Resume(ctx, form)
				if !between {
					if err != nil {
						t.Fatalf("Resume of a lock re-created with no holder in between: %v", err)
					}
					if got.Token() != l.Token() {
						t.Errorf("the resumed lock's token %d, want the form's %d", got.Token(), l.Token())
					}
					if err := got.Release(ctx); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err == nil {
					_ = got.Release(ctx)
					t.Fatalf("Resume after another holder's tenure succeeded with token %d", got.Token())
				}
				var qe *QuorumError
				if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || got != nil {
					t.Fatalf("Resume after another holder's tenure: %v, want ErrNotHeld and no lock", err)
				}
				if !strings.Contains(err.Error(), "later holder's token") {
					t.Errorf("the error does not name the later holder's token: %v", err)
				}
				// The refused claim changed nothing: the late refresh's
				// lock expires, and the name is free again after it.
				waitGone(t, cl, l)
			}
		})
	}
	t.Run("permit of two", func(t *testing.T) {
		l, err := sched.Semaphore("later:sem2", 2).Obtain(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		form, err := l.Handoff()
		if err != nil {
			t.Fatal(err)
		}
		o, err := other.Semaphore("later:sem2", 2).Obtain(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = o.Release(ctx) }()
		if o.Token() <= l.Token() {
			t.Fatalf("the second permit's token %d is not above the first's %d", o.Token(), l.Token())
		}
		got, err := w.Resume(ctx, form)
		if err != nil {
			t.Fatalf("Resume of a permit with another permit taken beside it: %v", err)
		}
		if err := got.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Findings A and B of issue 44: Resume's claim (resume.lua) passes the
// restart guard, as a vote does, and compares the form's token with the
// counter raised to the epoch's floor, as an acquire reads it. Each test
// plays a review's schedule on real nodes, with a node that loses recent
// writes (a restart from an RDB snapshot, or a failover to a replica that
// missed them) and a form delivered twice; each Resume that must fail
// succeeded before the fix (docs/handoff.md, "The claim and the restart
// guard").

// guardMaxTTL is the guarded Clients' max TTL, the recovery window of a
// restarted node, and the handed locks' TTL: long enough for each
// schedule's steps under -race on a loaded machine, short enough to wait
// out a recovery.
const guardMaxTTL = 4 * time.Second

// guardOn returns a Client of nodes with the restart guard on and
// guardMaxTTL, for nodes out of their first recovery (waitVoting).
func guardOn(t *testing.T, nodes []redis.UniversalClient) *Client {
	t.Helper()
	return newClient(t, nodes, WithMaxTTL(guardMaxTTL), WithRestartGuard(GuardOn))
}

// cutOff returns nodes with node i replaced by a client of a blackholed
// proxy to addr: a Client of them reaches every node but i, whose
// requests are dropped (no answer within the node timeout), while other
// Clients reach i.
func cutOff(t *testing.T, nodes []redis.UniversalClient, i int, addr string) []redis.UniversalClient {
	t.Helper()
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	p.SetBlackhole(true)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	out := slices.Clone(nodes)
	out[i] = c
	return out
}

// waitVoting waits until node i votes for a guarded Client (it is out of
// its recovery window), as a single-node Client's acquire of another name
// sees it: this lock's counter is left as it is.
func waitVoting(t *testing.T, node redis.UniversalClient) {
	t.Helper()
	probe := guardOn(t, []redis.UniversalClient{node})
	ctx := context.Background()
	deadline := time.Now().Add(10 * guardMaxTTL)
	for {
		l, err := probe.TryObtain(ctx, "voting-probe", time.Second)
		if err == nil {
			_ = l.Release(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not vote after %v: %v", 10*guardMaxTTL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshot writes node i's RDB file (SAVE: what the default save
// schedule's BGSAVE writes), which its next start loads.
func snapshot(t *testing.T, cl *cluster, i int) {
	t.Helper()
	if err := cl.clients[i].Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// crashFromSnapshot kills node i and starts it again on its port, from
// its data on disk (its last snapshot, or its append-only file when the
// node keeps one), with a new run_id, and waits until it answers.
func crashFromSnapshot(t *testing.T, cl *cluster, i int) {
	t.Helper()
	if err := cl.servers[i].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[i].Restart(); err != nil {
		t.Fatal(err)
	}
	reachable(t, cl.clients[i])
}

// reachable waits until a PING through node answers: the connections
// that a crash broke are gone from its pool.
func reachable(t *testing.T, node redis.UniversalClient) {
	t.Helper()
	eventually(t, "the node answers", func() bool { return node.Ping(context.Background()).Err() == nil })
}

// holdsSecret reports whether node holds l's secret: a plain lock's
// value, or a hold's field h:ID.
func holdsSecret(t *testing.T, node redis.UniversalClient, l *Lock) bool {
	t.Helper()
	ctx := context.Background()
	if l.secret.hold == nil {
		v, err := node.Get(ctx, l.keys.key).Result()
		return err == nil && v == l.secret.id
	}
	ok, err := node.HExists(ctx, l.keys.key, "h:"+l.secret.id).Result()
	return err == nil && ok
}

// tombstoned reports whether node has a claim's tombstone of l's secret.
func tombstoned(t *testing.T, node redis.UniversalClient, l *Lock) bool {
	t.Helper()
	n, err := node.Exists(context.Background(), l.keys.key+":claimed:"+l.secret.id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// counterOf is l's fencing counter on node, 0 when missing.
func counterOf(t *testing.T, node redis.UniversalClient, l *Lock) int64 {
	t.Helper()
	v, err := node.Get(context.Background(), l.keys.fence()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// equalCounters sets the fencing counter of lk's name to one value on
// every node, as the counters of a name in use agree: the clock x 1024,
// as a counter seeded now, above the floor of every node out of its
// recovery. (On a name's first use each node seeds its counter from its
// own clock, and a vote that came after the acquire was decided joins it
// with a counter above the token.)
func equalCounters(t *testing.T, nodes []redis.UniversalClient, lk Locker) {
	t.Helper()
	key := keys.Fence("{" + limits.Prefix + lk.(*handle).names[0] + "}")
	v := time.Now().UnixMilli() * 1024
	for _, n := range nodes {
		if err := n.Set(context.Background(), key, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// handOver sets the counters of handle's name equal on nodes, obtains a
// lock of handle with the guarded Client it was made of (for a reentrant
// owner, a second hold of it: the form is the hold at depth 2) and hands
// it off, once the nodes of on hold its secret with its token as counter.
// It returns the handed Lock, whose secret is the form's, and the form.
// An obtain returns once a quorum granted it; a node of on that missed
// the acquire (its request timed out on a loaded machine) makes it
// release and try again, up to three times: the schedules need the
// secret on every node of on.
func handOver(t *testing.T, handle Locker, depth2 bool, nodes, on []redis.UniversalClient) (*Lock, []byte) {
	t.Helper()
	ctx := context.Background()
	for try := 1; ; try++ {
		equalCounters(t, nodes, handle)
		l, err := handle.Obtain(ctx, guardMaxTTL)
		if err != nil {
			t.Fatal(err)
		}
		held := []*Lock{l}
		if depth2 {
			outer := l
			if l, err = handle.Obtain(ctx, guardMaxTTL); err != nil {
				t.Fatal(err)
			}
			if l.secret.id == outer.secret.id || l.Token() != outer.Token() {
				t.Fatalf("the re-entry's hold %s token %d, the first %s token %d", l.secret.id, l.Token(), outer.secret.id, outer.Token())
			}
			held = append(held, l)
		}
		missed := -1
		for i, n := range on {
			deadline := time.Now().Add(5 * time.Second)
			for !(holdsSecret(t, n, l) && counterOf(t, n, l) == l.Token()) {
				if time.Now().After(deadline) {
					missed = i
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if missed >= 0 {
				break
			}
		}
		if missed >= 0 {
			for i := len(held) - 1; i >= 0; i-- {
				_ = held[i].Release(ctx)
			}
			if try == 3 {
				t.Fatalf("node %d does not hold the lock with its token as counter, after %d tries", missed, try)
			}
			continue
		}
		if depth2 {
			outer := held[0]
			t.Cleanup(func() { _ = outer.Release(context.Background()) })
		}
		form, err := l.Handoff()
		if err != nil {
			t.Fatal(err)
		}
		return l, form
	}
}

// refusedRecovering checks that a Resume failed with ErrNotHeld, no lock,
// and node's reason ErrNodeRecovering.
func refusedRecovering(t *testing.T, got *Lock, err error, node int, what string) {
	t.Helper()
	if err == nil {
		_ = got.Release(context.Background())
		t.Fatalf("%s succeeded, with token %d", what, got.Token())
	}
	var qe *QuorumError
	if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || got != nil {
		t.Fatalf("%s: %v, want ErrNotHeld and no lock", what, err)
	}
	if !slices.ContainsFunc(qe.Nodes, func(n NodeResult) bool { return n.Node == node && errors.Is(n.Err, ErrNodeRecovering) }) {
		t.Fatalf("%s: node %d's reason is not that it recovers: %v", what, node, err)
	}
}

// twice fails the test when a second Resume of a form returned a lock
// (err nil) while the first one's is still held: two holders.
func twice(t *testing.T, first, second *Lock, err error) {
	t.Helper()
	if err != nil || first.Err() != nil {
		return
	}
	a, b := first.ValidUntil().Format(time.StampMilli), second.ValidUntil().Format(time.StampMilli)
	_ = second.Release(context.Background())
	t.Fatalf("the form resumed twice: W holds it (valid until %s) and R holds it (valid until %s)", a, b)
}

// Finding A of issue 44, with a restart: a form resumed by W while node 0
// was cut off from W (nodes 1 and 2 claimed), node 1 then restarted from
// a snapshot taken before W's claim (it holds the form's secret again, and
// no tombstone), and the form delivered again to R, which reaches nodes 0
// and 1. Before the claim passed the restart guard, R held the lock beside
// W, for each kind: two holders, or one form resumed twice. Node 1 now
// answers "recovering", and R fails.
func TestResumeTwiceAcrossARestartFromASnapshot(t *testing.T) {
	cl := startNodes(t, 3)
	sched := guarded(t, cl.clients, guardMaxTTL)
	w := guardOn(t, cutOff(t, cl.clients, 0, cl.servers[0].Addr()))
	r := guardOn(t, cl.clients)
	ctx := context.Background()
	for _, k := range resumeKinds(sched, "snap") {
		t.Run(k.label, func(t *testing.T) {
			// Every node votes: the last subtest restarted node 1, and the
			// warm-up needed only a quorum (a node whose first guarded
			// request came late may still recover; CI at load saw node 0).
			for _, n := range cl.clients {
				waitVoting(t, n)
			}
			l, form := handOver(t, k.handle, k.label == "reentrant", cl.clients, cl.clients)
			snapshot(t, cl, 1)
			first, err := w.Resume(ctx, form)
			if err != nil {
				t.Fatalf("W's Resume, with node 0 cut off: %v", err)
			}
			defer func() { _ = first.Release(ctx) }()
			crashFromSnapshot(t, cl, 1)
			if !holdsSecret(t, cl.clients[1], l) || tombstoned(t, cl.clients[1], l) || !holdsSecret(t, cl.clients[0], l) {
				t.Fatal("the schedule's premise: nodes 0 and 1 hold the form's secret, and node 1 (restored) no tombstone")
			}
			second, err := r.Resume(ctx, form)
			twice(t, first, second, err)
			refusedRecovering(t, second, err, 1, "R's Resume after node 1's restart")
			if err := first.Err(); err != nil {
				t.Fatalf("W lost the lock: %v", err)
			}
		})
	}
}

// switchable is a go-redis client of one node address whose connections
// go where target says: a failover that moves the node's address to the
// promoted replica, as Sentinel or a service address does.
func switchable(t *testing.T, addr string) (*redis.Client, *atomic.Pointer[string]) {
	t.Helper()
	target := new(atomic.Pointer[string])
	target.Store(&addr)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *target.Load())
		}})
	t.Cleanup(func() { _ = c.Close() })
	return c, target
}

// Finding A of issue 44, with a failover: node 1's replica has the handed
// lock but misses W's claim (its replication ends before it, as a lagging
// replica's does); W resumes while node 0 is cut off from it; node 1's
// master dies and the replica is promoted in its place. The form,
// delivered again to R, finds the secret on nodes 0 and 1 (the promoted
// replica has no tombstone). Before the claim passed the guard, R held the
// lock beside W. The promoted replica now recovers (a failover epoch), and
// R fails.
func TestResumeTwiceAcrossAFailover(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	replica := redistest.Start(t, 1)[0]
	rc := replica.Client()
	t.Cleanup(func() { _ = rc.Close() })
	node1, target := switchable(t, cl.servers[1].Addr())
	nodes := []redis.UniversalClient{cl.clients[0], node1, cl.clients[2]}
	if err := cl.clients[1].ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", cl.servers[1].Port()).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica's link is up", func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	sched := guarded(t, nodes, guardMaxTTL)
	w := guardOn(t, cutOff(t, nodes, 0, cl.servers[0].Addr()))
	r := guardOn(t, nodes)
	for _, n := range nodes {
		waitVoting(t, n)
	}
	l, form := handOver(t, sched.Mutex("failover"), false, nodes, nodes)
	eventually(t, "the replica has the handed lock", func() bool { return holdsSecret(t, rc, l) })
	// The replica's replication ends here: it misses what follows.
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	first, err := w.Resume(ctx, form)
	if err != nil {
		t.Fatalf("W's Resume, with node 0 cut off: %v", err)
	}
	defer func() { _ = first.Release(ctx) }()
	if holdsSecret(t, cl.clients[1], l) {
		t.Fatal("node 1's master still holds the form's secret after W's claim")
	}
	// The master dies; its address leads to the promoted replica, after
	// more than the identity check's trust (a failover takes longer,
	// docs/fencing.md).
	if err := cl.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	addr := replica.Addr()
	target.Store(&addr)
	time.Sleep(4 * limits.EpochTrust)
	reachable(t, node1)
	if !holdsSecret(t, node1, l) || tombstoned(t, node1, l) || !holdsSecret(t, cl.clients[0], l) {
		t.Fatal("the schedule's premise: nodes 0 and 1 hold the form's secret, and the promoted replica no tombstone")
	}
	second, err := r.Resume(ctx, form)
	twice(t, first, second, err)
	refusedRecovering(t, second, err, 1, "R's Resume after the failover")
}

// belowLater plays finding B of issue 44 up to the second delivery: with
// the counters equal, the scheduler obtains a plain lock (token t) and
// hands it off; node 1 snapshots; W resumes it with node 0 cut off (nodes
// 1 and 2 claimed) and releases; H obtains the name on nodes 1 and 2 (node
// 0 still holds the form's secret) with t+1 and releases; node 1 restarts
// from its snapshot, with the form's secret and counter t. It returns the
// handed Lock, the form and H's token.
func belowLater(t *testing.T, cl *cluster, name string) (*Lock, []byte, int64) {
	t.Helper()
	ctx := context.Background()
	for _, n := range cl.clients {
		waitVoting(t, n)
	}
	sched := guardOn(t, cl.clients)
	w := guardOn(t, cutOff(t, cl.clients, 0, cl.servers[0].Addr()))
	h := guardOn(t, cl.clients)
	l, form := handOver(t, sched.Mutex(name), false, cl.clients, cl.clients)
	snapshot(t, cl, 1)
	first, err := w.Resume(ctx, form)
	if err != nil {
		t.Fatalf("W's Resume, with node 0 cut off: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("W's release: %v", err)
	}
	later, err := h.Obtain(ctx, name, guardMaxTTL)
	if err != nil {
		t.Fatalf("H's obtain after W's release: %v", err)
	}
	// Above the form's: W's release retired the form's token (finding
	// G's fix raises the counter by one), so H draws t+2 where it drew
	// t+1 before.
	if later.Token() <= l.Token() {
		t.Fatalf("H's token %d, want one above the form's %d", later.Token(), l.Token())
	}
	if err := later.Release(ctx); err != nil {
		t.Fatal(err)
	}
	crashFromSnapshot(t, cl, 1)
	if !holdsSecret(t, cl.clients[1], l) || counterOf(t, cl.clients[1], l) != l.Token() || tombstoned(t, cl.clients[1], l) {
		t.Fatal("the schedule's premise: node 1, restored, holds the form's secret with counter t and no tombstone")
	}
	return l, form, later.Token()
}

// Finding B of issue 44: the same gap gives a token below a later
// holder's. After belowLater's schedule, R resumes the form on nodes 0 and
// 1, whose counters are both the form's t, below H's t+1. While node 1
// recovers, its restart guard refuses the claim. After its recovery, a
// refresh of the scheduler that was delayed in the network re-creates the
// lock with the form's secret on every node (as TestResumeAfterALaterHolder
// sends it), and node 1's counter is still t, below its epoch's floor: the
// claim reads the counter raised to the floor, as an acquire would, and
// refuses it as a later holder's token. Before the fix, R held the lock
// with token t after H's t+1 in each case.
func TestResumeBelowALaterToken(t *testing.T) {
	cl := startNodes(t, 3)
	guarded(t, cl.clients, guardMaxTTL)
	r := guardOn(t, cl.clients)
	ctx := context.Background()
	t.Run("recovering", func(t *testing.T) {
		_, form, hToken := belowLater(t, cl, "below:recovering")
		got, err := r.Resume(ctx, form)
		if err == nil {
			_ = got.Release(ctx)
			t.Fatalf("R resumed with token %d, after H's %d", got.Token(), hToken)
		}
		refusedRecovering(t, got, err, 1, "R's Resume while node 1 recovers")
	})
	t.Run("recovered", func(t *testing.T) {
		l, form, hToken := belowLater(t, cl, "below:recovered")
		waitVoting(t, cl.clients[1])
		waitGone(t, cl, l)
		// Re-created as a Client before issue 44 does it (its refresh
		// carries no token: MaxInt64 passes the retired-token check), so
		// that the claim's own check is what refuses R.
		for i, res := range lateRefresh(t, l, math.MaxInt64) {
			if i < 2 && res != script.Reseeded {
				t.Fatalf("node %d: the late refresh did %v, want a re-seed", i, res)
			}
		}
		if counterOf(t, cl.clients[1], l) != l.Token() {
			t.Fatalf("node 1's counter %d, want the form's token %d (restored)", counterOf(t, cl.clients[1], l), l.Token())
		}
		got, err := r.Resume(ctx, form)
		if err == nil {
			_ = got.Release(ctx)
			t.Fatalf("R resumed with token %d, after H's %d", got.Token(), hToken)
		}
		var qe *QuorumError
		if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || got != nil {
			t.Fatalf("R's Resume: %v, want ErrNotHeld and no lock", err)
		}
		if !slices.ContainsFunc(qe.Nodes, func(n NodeResult) bool { return n.Node == 1 && errors.Is(n.Err, errLaterHolder) }) {
			t.Fatalf("node 1's reason is not a later holder's token: %v", err)
		}
	})
}

// The variant of finding B that the randomized checker found: the
// scheduler's lock is held on nodes 0 and 1 (node 2 cut off from it);
// node 0 snapshots; W1 resumes the form with node 1 cut off, claims node 0
// alone (1 of 3), fails, and gives its claim back, which frees the name on
// a quorum; H, cut off from node 1, obtains it legitimately on nodes 0
// and 2, with a token above the form's, and releases; node 0 restarts from its snapshot, with the
// form's secret and no tombstone. A second copy of the form then resumed
// on nodes 0 and 1 with the form's lower token. Node 0 now recovers, and
// the Resume fails.
func TestResumeAfterAFailedResume(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	guarded(t, cl.clients, guardMaxTTL)
	for _, n := range cl.clients {
		waitVoting(t, n)
	}
	sched := guardOn(t, cutOff(t, cl.clients, 2, cl.servers[2].Addr()))
	w1 := guardOn(t, cutOff(t, cl.clients, 1, cl.servers[1].Addr()))
	// H cannot reach node 1 either (which holds the form's lock and
	// refuses it anyway): its second round, which raises the counters of
	// every node it reaches, leaves node 1's.
	h := guardOn(t, cutOff(t, cl.clients, 1, cl.servers[1].Addr()))
	r := guardOn(t, cl.clients)
	l, form := handOver(t, sched.Mutex("failed"), false, cl.clients, cl.clients[:2])
	snapshot(t, cl, 0)
	if got, err := w1.Resume(ctx, form); !errors.Is(err, ErrNotHeld) {
		if got != nil {
			_ = got.Release(ctx)
		}
		t.Fatalf("W1's Resume with node 1 cut off and no lock on node 2: %v, want ErrNotHeld", err)
	}
	eventually(t, "W1 gave its claim on node 0 back", func() bool {
		n, err := cl.clients[0].Exists(ctx, l.keys.key).Result()
		return err == nil && n == 0
	})
	later, err := h.Obtain(ctx, "failed", guardMaxTTL)
	if err != nil {
		t.Fatalf("H's obtain after W1 gave its claim back: %v", err)
	}
	if later.Token() <= l.Token() {
		t.Fatalf("H's token %d is not above the form's %d", later.Token(), l.Token())
	}
	if err := later.Release(ctx); err != nil {
		t.Fatal(err)
	}
	crashFromSnapshot(t, cl, 0)
	if !holdsSecret(t, cl.clients[0], l) || tombstoned(t, cl.clients[0], l) || !holdsSecret(t, cl.clients[1], l) {
		t.Fatal("the schedule's premise: nodes 0 (restored, no tombstone) and 1 hold the form's secret")
	}
	got, err := r.Resume(ctx, form)
	if err == nil {
		_ = got.Release(ctx)
		t.Fatalf("the second copy of the form resumed with token %d, after H's %d", got.Token(), later.Token())
	}
	refusedRecovering(t, got, err, 0, "the second copy's Resume")
}

// On a Redis Cluster the claim runs the guard on the lock's own epoch
// record (in the lock's slot, beside its key and counter, as the
// acquire's): a claim of a lock whose record another process wrote while
// it recovered (a restart that kept the data, of a process whose recovery
// had not ended) answers "recovering", and on names in several slots the
// claims of the others resume.
func TestResumeRedisCluster(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	c := guardOn(t, []redis.UniversalClient{node})
	ctx := context.Background()
	slots := map[int64]bool{}
	for i := range 4 {
		name := fmt.Sprintf("cluster-resume-%d", i)
		slot, err := node.ClusterKeySlot(ctx, "{"+limits.Prefix+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		// A name new to a fresh cluster recovers for the max TTL first.
		octx, cancel := context.WithTimeout(ctx, 10*guardMaxTTL)
		l, err := c.Mutex(name).Obtain(octx, guardMaxTTL)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		form, err := l.Handoff()
		if err != nil {
			t.Fatal(err)
		}
		restarted := i%2 == 1
		if restarted {
			// The record as a restart that kept the data leaves it: another
			// process's run_id, checked long ago, its recovery not over;
			// no fast-path key. (Its end is what keeps the node out: the
			// nodes started more than the max TTL ago, and a restart's
			// epoch begins at the process start.)
			rec := l.keys.clusterEpoch
			until := strconv.FormatInt(time.Now().Add(guardMaxTTL).UnixMilli(), 10)
			if err := node.HSet(ctx, rec, "run", "0123456789abcdef", "check", "0", "until", until).Err(); err != nil {
				t.Fatal(err)
			}
			if err := node.Del(ctx, keys.Trusted(rec)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.Resume(ctx, form)
		if restarted {
			refusedRecovering(t, got, err, 0, name+": Resume after its record's restart")
			continue
		}
		if err != nil {
			t.Fatalf("%s: Resume: %v", name, err)
		}
		if err := got.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(slots) < 2 {
		t.Fatalf("the names fell in %d slot(s)", len(slots))
	}
}

// A failed Resume gives back what it claimed, and retires the form's
// token there as any release does: the form's lock is on node 0 with its
// counter below the token (node 0's vote was lower), and gone from nodes
// 1 and 2, so that the claim wins node 0 alone and fails. Node 0's
// counter must then be above the form's token, so that a late refresh of
// the handing Client does not bring the form's lock back there. (The
// give-back used to retire token 0: one INCR, which left the counter
// below the form's token.)
func TestFailedResumeRetiresTheFormsToken(t *testing.T) {
	cl := startNodes(t, 3)
	c := guarded(t, cl.clients, guardMaxTTL)
	for _, n := range cl.clients {
		waitVoting(t, n)
	}
	ctx := context.Background()
	l, form := handOver(t, c.Mutex("failed-resume"), false, cl.clients, cl.clients)
	fence := l.keys.fence()
	if err := cl.clients[0].Set(ctx, fence, l.Token()-5, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.clients[1:] {
		if err := n.Del(ctx, l.keys.key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := guardOn(t, cl.clients).Resume(ctx, form)
	if err == nil {
		_ = got.Release(ctx)
		t.Fatal("Resume won with the form's lock on one node of three")
	}
	eventually(t, "node 0 gave the claimed lock back", func() bool {
		return cl.clients[0].Exists(ctx, l.keys.key).Val() == 0
	})
	if v := counterOf(t, cl.clients[0], l); v <= l.Token() {
		t.Fatalf("node 0's counter %d after the give-back, want above the form's token %d", v, l.Token())
	}
	// Nodes 1 and 2 never saw a release (the key was taken away by hand):
	// a re-seed there is the refresh's work.
	if r := lateRefresh(t, l, l.Token())[0]; r != script.Retired {
		t.Fatalf("node 0: the handing Client's late refresh did %v after the failed Resume, want Retired", r)
	}
}
