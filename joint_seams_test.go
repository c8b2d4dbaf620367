package redlock

// Issue 44's findings C to F on real nodes: the configuration records
// where a move meets a second move (C, D), another spelling of a node's
// address (E) and a handoff (F).

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// seamOpts are the options of every Client of these tests: records on, a
// short max TTL so that records expire within seconds.
func seamOpts(prefix string) []Option {
	return []Option{WithPrefix(prefix), WithMaxTTL(2 * time.Second), WithNodeTimeout(300 * time.Millisecond), WithConfigRecords(true)}
}

// readRecords reads every node's configuration records as redlock doctor
// does (HGETALL and TIME; nil for a node that did not answer).
func readRecords(t *testing.T, nodes []redis.UniversalClient, prefix string) []*joint.Records {
	t.Helper()
	ctx := context.Background()
	key := keys.Layout{Prefix: prefix}.Configs()
	out := make([]*joint.Records, len(nodes))
	for i, c := range nodes {
		all, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			continue
		}
		now, err := c.Time(ctx).Result()
		if err != nil {
			continue
		}
		ms := now.UnixMilli()
		rc := &joint.Records{Now: ms, Start: ms, Fields: map[string]joint.Value{}}
		for f, v := range all {
			var n [3]int64
			for j, p := range strings.SplitN(v, ":", 3) {
				n[j], _ = strconv.ParseInt(p, 10, 64)
			}
			if n[0] <= ms {
				continue
			}
			val := joint.Value{Left: n[0] - ms, Floor: n[1]}
			if n[2] != 0 {
				val.Fresh = n[2] - ms
			}
			rc.Fields[f] = val
		}
		out[i] = rc
	}
	return out
}

// stepOf is what redlock doctor says of the move of the joint Client j,
// read on the nodes all (j's nodes, in j's order).
func stepOf(t *testing.T, j *Client, all []redis.UniversalClient, prefix string) joint.Reading {
	t.Helper()
	s := j.e.rec.jointSets()
	return joint.StepOf(readRecords(t, all, prefix), s.Cur, s.Next, joint.SetName{FP: s.CurFP, Alias: s.CurAlias}, joint.SetName{FP: s.NextFP, Alias: s.NextAlias}, joint.Mut{})
}

// obtainOnce obtains and releases "other" with c: a Client's first
// contact, and its first configuration record, or a check that c can
// lock at all (what says which, for the failure).
func obtainOnce(t *testing.T, c *Client, what string) {
	t.Helper()
	ctx := context.Background()
	l, err := c.TryObtain(ctx, "other", time.Second)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = l.Release(ctx)
}

// refusedBeside checks that c cannot obtain name, which another Client
// holds: with ErrConfigConflict or ErrNotObtained, not a lock.
func refusedBeside(t *testing.T, c *Client, name, who string) {
	t.Helper()
	ctx := context.Background()
	l, err := c.TryObtain(ctx, name, time.Second)
	if err == nil {
		_ = l.Release(ctx)
		t.Fatalf("%s obtained %q, which another Client holds: two holders", who, name)
	}
	if !errors.Is(err, ErrConfigConflict) && !errors.Is(err, ErrNotObtained) {
		t.Fatalf("%s: %v, want ErrConfigConflict or ErrNotObtained", who, err)
	}
}

// TestJointClientTakesTheMoveFloor is finding C: A = {0..4}, B = {0,1,2},
// C = {0,1,5}. A Client on A alone takes "job" three times at nodes 2 to
// 4 (nodes 0 and 1 are paused, their counters behind); the move A → B
// follows the runbook; then a Client on joint(B, C) takes "job" at nodes
// 0 and 1 alone (2 and 5 paused). Its token must be above the A-alone
// Client's last: it is on B, whose move floor covers every grant of A.
func TestJointClientTakesTheMoveFloor(t *testing.T) {
	cl := startNodes(t, 6)
	ctx := context.Background()
	prefix := "seamc:"
	opts := seamOpts(prefix)
	a, b, c := []int{0, 1, 2, 3, 4}, []int{0, 1, 2}, []int{0, 1, 5}
	fence := keys.Fence("{" + prefix + "job}")
	// Counters below every node time x 1024, as the proof assumes, and
	// behind on nodes 0 and 1.
	for i, v := range map[int]int{0: 1000, 1: 1000, 2: 5_000_000, 3: 5_000_000, 4: 5_000_000} {
		if err := cl.clients[i].Set(ctx, fence, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onA := newClient(t, pick(cl, a), opts...)
	cl.pause(t, 0, 1)
	var last int64
	for range 3 {
		l, err := onA.TryObtain(ctx, "job", time.Second)
		if err != nil {
			t.Fatalf("A alone, nodes 2 to 4: %v", err)
		}
		last = l.Token()
		_ = l.Release(ctx)
	}
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	// The move A → B, by the runbook: joint, wait for doctor's step 3,
	// then B alone.
	ab := newClient(t, pick(cl, a), append(opts, nextOf(cl, b))...)
	obtainOnce(t, ab, "the joint Client")
	_ = onA.Close()
	eventually(t, "doctor says step 3 of A → B", func() bool {
		return stepOf(t, ab, pick(cl, a), prefix).Step == joint.StepThree
	})
	onB := newClient(t, pick(cl, b), opts...)
	obtainOnce(t, onB, "B alone after step 3")
	_ = ab.Close()
	// The move B → C begins: joint Clients lock "job" at 0 and 1, one
	// that met every node before 2 and 5 became slow, and one whose
	// first contact is then (it cannot read their identities: it may
	// refuse, but must not take a lower token). The second's attempt
	// comes first: a grant of the first would raise the counters.
	warm := newClient(t, pick(cl, b), append(opts, nextOf(cl, c))...)
	obtainOnce(t, warm, "the warm joint Client")
	cold := newClient(t, pick(cl, b), append(opts, nextOf(cl, c))...)
	cl.pause(t, 2, 5)
	for _, bc := range []struct {
		name  string
		c     *Client
		known bool
	}{{"first contact", cold, false}, {"identified", warm, true}} {
		l, err := bc.c.TryObtain(ctx, "job", time.Second)
		if !bc.known && errors.Is(err, ErrConfigConflict) {
			continue
		}
		if err != nil {
			t.Fatalf("joint(B, C), %s, at nodes 0 and 1: %v", bc.name, err)
		}
		_ = l.Release(ctx)
		if l.Token() <= last {
			t.Fatalf("joint(B, C), %s, got token %d after %d, the last of A alone: it ignored B's move floor", bc.name, l.Token(), last)
		}
	}
}

// TestJointClientRefusesAnotherMovesClients is finding D: A = {0,1,2},
// B = {2,3,4}, C = {3,4,5}. A Client on A alone holds "job" while a
// joint(A, B) Client records. A Client on B alone is refused; so must be
// a Client on joint(B, C), whose quorums of B and C ({3,4}) miss A.
func TestJointClientRefusesAnotherMovesClients(t *testing.T) {
	cl := startNodes(t, 6)
	ctx := context.Background()
	prefix := "seamd:"
	opts := seamOpts(prefix)
	a, b, c := []int{0, 1, 2}, []int{2, 3, 4}, []int{3, 4, 5}
	onA := newClient(t, pick(cl, a), opts...)
	held, err := onA.TryObtain(ctx, "job", 2*time.Second, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	ab := newClient(t, pick(cl, a), append(opts, nextOf(cl, b))...)
	obtainOnce(t, ab, "the joint Client")
	onB := newClient(t, pick(cl, b), opts...)
	if _, err := onB.TryObtain(ctx, "job", time.Second); !errors.Is(err, ErrConfigConflict) {
		t.Fatalf("B alone beside A alone: %v, want ErrConfigConflict", err)
	}
	bc := newClient(t, pick(cl, b), append(opts, nextOf(cl, c))...)
	refusedBeside(t, bc, "job", "joint(B, C) beside a holder on A alone")
	if err := held.Err(); err != nil {
		t.Fatalf("the holder on A alone lost its lock: %v", err)
	}
}

// localhostClients are clients of the given test servers through the
// address localhost:PORT, where the tests' own clients use 127.0.0.1.
func localhostClients(t *testing.T, cl *cluster, idx []int) []redis.UniversalClient {
	t.Helper()
	var out []redis.UniversalClient
	for _, i := range idx {
		c := redis.NewClient(&redis.Options{Addr: "localhost:" + strconv.Itoa(cl.servers[i].Port())})
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, c)
	}
	return out
}

// TestMoveKnowsNodesNotSpellings is finding E: A = {0,1,2}, B = {2,3,4}.
// A service reaches A's nodes as localhost:PORT and holds "job" with
// auto-refresh; the joint Client, the doctor's reading and a Client on B
// alone use 127.0.0.1:PORT. The doctor must not say step 3, and the
// Client on B alone must not obtain "job".
func TestMoveKnowsNodesNotSpellings(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	prefix := "seame:"
	opts := seamOpts(prefix)
	a, b := []int{0, 1, 2}, []int{2, 3, 4}
	svc := newClient(t, localhostClients(t, cl, a), opts...)
	held, err := svc.TryObtain(ctx, "job", 2*time.Second, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	ab := newClient(t, pick(cl, a), append(opts, nextOf(cl, b))...)
	obtainOnce(t, ab, "the joint Client")
	// Two of the joint Client's recording periods (max TTL / 4 each).
	time.Sleep(time.Second + 100*time.Millisecond)
	all := pick(cl, []int{0, 1, 2, 3, 4})
	if r := stepOf(t, ab, all, prefix); r.Step == joint.StepThree {
		t.Fatalf("doctor says step 3 is safe while a Client of A alone holds \"job\" (through localhost)")
	}
	onB := newClient(t, pick(cl, b), opts...)
	refusedBeside(t, onB, "job", "B alone beside a holder on A alone (another spelling)")
}

// TestResumedHolderRecords is finding F: A = {0,1,2}, B = {2,3,4}. A
// scheduler on A alone obtains "job" and hands it off; a worker on A
// alone resumes it with auto-refresh; a joint Client records; the
// scheduler closes and its record expires. The worker holds "job", so
// the doctor must not say step 3, and a Client on B alone must not
// obtain "job".
func TestResumedHolderRecords(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	prefix := "seamf:"
	opts := seamOpts(prefix)
	a, b := []int{0, 1, 2}, []int{2, 3, 4}
	sched := newClient(t, pick(cl, a), opts...)
	l, err := sched.TryObtain(ctx, "job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	form, err := l.Handoff()
	if err != nil {
		t.Fatal(err)
	}
	worker := newClient(t, pick(cl, a), opts...)
	held, err := worker.Resume(ctx, form, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	ab := newClient(t, pick(cl, a), append(opts, nextOf(cl, b))...)
	obtainOnce(t, ab, "the joint Client")
	_ = sched.Close()
	// The scheduler's record lives 1.5 max TTL from its last write.
	time.Sleep(3*time.Second + 500*time.Millisecond)
	if err := held.Err(); err != nil {
		t.Fatalf("the worker lost the resumed lock: %v", err)
	}
	all := pick(cl, []int{0, 1, 2, 3, 4})
	if r := stepOf(t, ab, all, prefix); r.Step == joint.StepThree {
		t.Fatalf("doctor says step 3 is safe while a worker on A alone holds a resumed \"job\"")
	}
	onB := newClient(t, pick(cl, b), opts...)
	refusedBeside(t, onB, "job", "B alone beside a worker that resumed on A alone")
}

// holderPaths are the ways a Client can come to hold a lock, each run once
// on a Client of three nodes for the name "p": every one must record the
// Client's configuration first and refuse on a conflict
// (TestEveryHolderPathRecords). form is a handoff form of "p" held by
// another Client, for Resume.
var holderPaths = map[string]func(ctx context.Context, c *Client, form []byte) (*Lock, error){
	"Client.Obtain": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) { return c.Obtain(ctx, "p", time.Second) },
	"Client.TryObtain": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.TryObtain(ctx, "p", time.Second)
	},
	"Client.Do": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return nil, c.Do(ctx, "p", time.Second, noop)
	},
	"Client.Resume": func(ctx context.Context, c *Client, form []byte) (*Lock, error) { return c.Resume(ctx, form) },
	"Mutex": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.Mutex("p").TryObtain(ctx, time.Second)
	},
	"Reentrant": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.Reentrant("p", "o").Obtain(ctx, time.Second)
	},
	"RWMutex/reader": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		r, _ := c.RWMutex("p")
		return r.TryObtain(ctx, time.Second)
	},
	"RWMutex/writer": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		_, w := c.RWMutex("p")
		return nil, w.Do(ctx, time.Second, noop)
	},
	"Semaphore": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.Semaphore("p", 2).TryObtain(ctx, time.Second)
	},
	"All": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.All("p", "q").TryObtain(ctx, time.Second)
	},
	"Any": func(ctx context.Context, c *Client, _ []byte) (*Lock, error) {
		return c.Any("p", "q").Obtain(ctx, time.Second)
	},
}

func noop(context.Context) error { return nil }

// TestEveryHolderPathRecords: every path to a held lock records the
// Client's configuration (a Client that holds anything takes part in the
// records, however it came to hold it: issue 44's finding F was Resume),
// and is refused with ErrConfigConflict beside a move and a live Client
// of another set alone. Every method of *Client that makes a handle or a
// lock must have its rows: one added later without them fails here.
func TestEveryHolderPathRecords(t *testing.T) {
	exempt := map[string]string{
		"Close":        "ends the Client",
		"BreakerState": "reads the Client's own state",
		"Check":        "holds nothing: it reads a sequencer's standing on the nodes (docs/fencing.md)",
	}
	ct := reflect.TypeFor[*Client]()
	for i := range ct.NumMethod() {
		name := ct.Method(i).Name
		covered := false
		for path := range holderPaths {
			covered = covered || path == "Client."+name || strings.HasPrefix(path, name)
		}
		if exempt[name] == "" && !covered {
			t.Errorf("(*Client).%s has no row in holderPaths: how does it come to hold, and does it record?", name)
		}
	}
	cl := startNodes(t, 3)
	ctx := context.Background()
	for path, run := range holderPaths {
		t.Run(path, func(t *testing.T) {
			prefix := "path" + strings.NewReplacer(".", "", "/", "").Replace(path) + ":"
			opts := seamOpts(prefix)
			handoff := func() []byte {
				other := newClient(t, cl.clients, append(opts, WithConfigRecords(false))...)
				l, err := other.TryObtain(ctx, "p", 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				form, err := l.Handoff()
				if err != nil {
					t.Fatal(err)
				}
				return form
			}
			var form []byte
			if path == "Client.Resume" {
				form = handoff()
			}
			c := newClient(t, cl.clients, opts...)
			l, err := run(ctx, c, form)
			if err != nil {
				t.Fatalf("on free nodes: %v", err)
			}
			if l != nil {
				_ = l.Release(ctx)
			}
			fp := c.e.rec.jointSets().CurFP
			configs := keys.Layout{Prefix: prefix}.Configs()
			// The obtain's record returns at a quorum; the rest follow.
			for i, n := range cl.clients {
				eventually(t, fmt.Sprintf("node %d records the Client after %s", i, path), func() bool {
					ok, _ := n.HExists(ctx, configs, keys.ConfigSingle(fp)).Result()
					return ok
				})
			}
			// Beside a move between this set and X, and a live Client of
			// X alone, a fresh Client of the same nodes must refuse.
			if path == "Client.Resume" {
				form = handoff()
			}
			exp := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
			for _, n := range cl.clients {
				if err := n.HSet(ctx, configs, keys.ConfigJoint(fp, "X"), exp, keys.ConfigSingle("X"), exp).Err(); err != nil {
					t.Fatal(err)
				}
			}
			fresh := newClient(t, cl.clients, opts...)
			if l, err := run(ctx, fresh, form); !errors.Is(err, ErrConfigConflict) {
				if l != nil {
					_ = l.Release(ctx)
				}
				t.Fatalf("beside a live Client of another set alone: %v, want ErrConfigConflict", err)
			}
		})
	}
}

// TestMixedVersionsMove: Clients of a release before issue 44 name a set
// by its addresses; this release's, by its nodes' identities, and writes
// its own fields under the address fingerprint too (joint.Sets.CurAlias).
// A = {0,1,2}, B = {2,3,4}. The earlier release's Client on A alone is
// played by a Client without records that holds "job" and the record
// that release's recorder writes (record.lua is unchanged; its field is
// c: and the fingerprint of the addresses): this release cannot run the
// earlier one in a test. A joint Client of this release records: a Client
// of this release on B alone must refuse "job", and doctor's rule must
// not say step 3. The other way: the records must refuse an earlier
// release's Client on B alone beside this release's Client on A alone,
// by that release's rule (the conflict of a Client on one set, its set
// named by address: joint.Conflicting with Sets.Known).
func TestMixedVersionsMove(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	prefix := "seammix:"
	opts := seamOpts(prefix)
	a, b := []int{0, 1, 2}, []int{2, 3, 4}
	addrs := func(idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, cl.servers[i].Addr())
		}
		return out
	}
	legacyA, legacyB := keys.Fingerprint(addrs(a)), keys.Fingerprint(addrs(b))
	configs := keys.Layout{Prefix: prefix}.Configs()
	old := newClient(t, pick(cl, a), append(opts, WithConfigRecords(false))...)
	held, err := old.TryObtain(ctx, "job", 2*time.Second, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	for _, n := range pick(cl, a) {
		if _, err := script.Record(ctx, goredis.New(n), configs, keys.Layout{Prefix: prefix}.NodeEpoch(), script.Guard{Mode: '0'}, []script.RecordField{{Name: keys.ConfigSingle(legacyA), TTL: time.Minute}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ab := newClient(t, pick(cl, a), append(opts, nextOf(cl, b))...)
	obtainOnce(t, ab, "the joint Client")
	time.Sleep(time.Second) // two of the joint Client's recording periods
	all := pick(cl, []int{0, 1, 2, 3, 4})
	if r := stepOf(t, ab, all, prefix); r.Step == joint.StepThree {
		t.Fatalf("doctor's rule says step 3 beside an earlier release's Client of A alone: %+v", r)
	}
	onB := newClient(t, pick(cl, b), opts...)
	if _, err := onB.TryObtain(ctx, "job", time.Second); !errors.Is(err, ErrConfigConflict) {
		t.Fatalf("this release on B alone beside an earlier release's Client on A alone: %v, want ErrConfigConflict", err)
	}
	// The other way, under another prefix: this release's Client on A
	// alone records under the address fingerprint too, and the joint
	// Client its move: an earlier release's Client on B alone reads
	// c:legacyA beside j:legacyA:legacyB.
	prefix2 := "seammix2:"
	opts2 := seamOpts(prefix2)
	onA := newClient(t, pick(cl, a), opts2...)
	ab2 := newClient(t, pick(cl, a), append(opts2, nextOf(cl, b))...)
	for _, c := range []*Client{onA, ab2} {
		obtainOnce(t, c, "a Client of this release")
	}
	recs := readRecords(t, pick(cl, b), prefix2)
	earlierB := joint.Sets{Cur: 0b111, CurFP: legacyB, Known: true}
	if c := joint.Conflicting(recs, earlierB); c == nil {
		t.Fatalf("an earlier release's Client on B alone sees no conflict beside this release's Client on A alone: %+v", recs)
	}
}
