package redlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
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
