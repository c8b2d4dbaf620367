package redlock

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

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// moves are the common changes of a deployment's nodes, as indexes of six
// test servers: the current set and the next.
var moves = []struct {
	name      string
	cur, next []int
}{
	{"replace one of five", []int{0, 1, 2, 3, 4}, []int{0, 1, 2, 3, 5}},
	{"grow three to five", []int{0, 1, 2}, []int{0, 1, 2, 3, 4}},
	{"shrink five to three", []int{0, 1, 2, 3, 4}, []int{0, 1, 2}},
	{"move to new hosts", []int{0, 1, 2}, []int{3, 4, 5}},
}

func pick(cl *cluster, idx []int) []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, i := range idx {
		out = append(out, cl.clients[i])
	}
	return out
}

// nextOf is WithNextNodes of the servers idx, each through a go-redis
// driver node of its own: matched to the current set by address.
func nextOf(cl *cluster, idx []int) Option {
	var ns []driver.Node
	for _, c := range pick(cl, idx) {
		ns = append(ns, goredis.New(c))
	}
	return WithNextNodes(ns...)
}

// TestJointExcludesBothSides: for each common change, a Client in joint
// configuration excludes a Client on the current set alone and one on the
// next set alone, both ways, for the plain lock, a writer of the lock
// family and a semaphore's permit (k = 1). Each pairing uses its own
// prefix, so that the configuration records of one pairing do not refuse
// the other's Clients.
func TestJointExcludesBothSides(t *testing.T) {
	cl := startNodes(t, 6)
	ctx := context.Background()
	for mi, mv := range moves {
		t.Run(mv.name, func(t *testing.T) {
			for side, alone := range map[string][]int{"current": mv.cur, "next": mv.next} {
				prefix := fmt.Sprintf("joint%d%s:", mi, side)
				joint := newClient(t, pick(cl, mv.cur), WithPrefix(prefix), WithNodeTimeout(time.Second), WithConfigRecords(true), nextOf(cl, mv.next))
				single := newClient(t, pick(cl, alone), WithPrefix(prefix), WithNodeTimeout(time.Second), WithConfigRecords(true))
				lockers := map[string]func(c *Client) Locker{
					"plain":  func(c *Client) Locker { return c.Mutex("x") },
					"writer": func(c *Client) Locker { _, w := c.RWMutex("y"); return w },
					"permit": func(c *Client) Locker { return c.Semaphore("z", 1) },
				}
				for kind, mk := range lockers {
					for _, order := range [][2]*Client{{joint, single}, {single, joint}} {
						first, second := order[0], order[1]
						l, err := mk(first).TryObtain(ctx, time.Minute)
						if err != nil {
							t.Fatalf("%s %s: first TryObtain: %v", side, kind, err)
						}
						if l2, err := mk(second).TryObtain(ctx, time.Minute); err == nil {
							_ = l2.Release(ctx)
							t.Fatalf("%s %s: the second Client obtained a lock the first holds", side, kind)
						} else if !errors.Is(err, ErrNotObtained) {
							t.Fatalf("%s %s: second TryObtain: %v, want ErrNotObtained", side, kind, err)
						}
						if err := l.Release(ctx); err != nil {
							t.Fatalf("%s %s: Release: %v", side, kind, err)
						}
					}
				}
			}
		})
	}
}

// TestJointRefreshNeedsBothQuorums: a joint lock whose key is taken away on
// a majority of the next set (and nowhere else) cannot be refreshed: a
// quorum of the current set alone is not enough.
func TestJointRefreshNeedsBothQuorums(t *testing.T) {
	cl := startNodes(t, 6)
	ctx := context.Background()
	mv := moves[3] // {0,1,2} to {3,4,5}
	c := newClient(t, pick(cl, mv.cur), WithPrefix("jref:"), WithNodeTimeout(time.Second), WithConfigRecords(true), nextOf(cl, mv.next))
	l, err := c.TryObtain(ctx, "r", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := "{jref:r}"
	for _, i := range mv.next[:2] {
		if err := cl.clients[i].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = l.Refresh(ctx, time.Minute)
	var qe *QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Refresh with two of the next three nodes another's: %v, want a QuorumError", err)
	}
	if !strings.Contains(err.Error(), "joint configuration") {
		t.Errorf("the error does not name the joint rule: %v", err)
	}
}

// TestTokensIncreaseAcrossTheMove runs the runbook for each common change
// with one lock name: holders on the current set alone, then in joint
// configuration beside them, then (after the current-set Clients are
// gone and their records expired) on the next set alone; every token is
// above the one before. A Client on the next set alone that starts before
// the current set's records expired is refused with ErrConfigConflict.
func TestTokensIncreaseAcrossTheMove(t *testing.T) {
	cl := startNodes(t, 6)
	ctx := context.Background()
	const maxTTL = 3 * time.Second
	for mi, mv := range moves {
		t.Run(mv.name, func(t *testing.T) {
			prefix := fmt.Sprintf("jtok%d:", mi)
			opts := []Option{WithPrefix(prefix), WithMaxTTL(maxTTL), WithNodeTimeout(time.Second), WithConfigRecords(true)}
			var last int64
			take := func(c *Client, who string) {
				t.Helper()
				l, err := c.TryObtain(ctx, "t", 2*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", who, err)
				}
				if l.Token() <= last {
					t.Fatalf("%s: token %d after %d", who, l.Token(), last)
				}
				last = l.Token()
				if err := l.Release(ctx); err != nil {
					t.Fatalf("%s: Release: %v", who, err)
				}
				// Release returns once a quorum deleted the key; the next
				// take needs it gone everywhere (on a loaded machine the
				// others' deletes came after the next attempt: CI).
				eventually(t, who+"'s release reached every node", func() bool {
					for _, n := range cl.clients {
						if n.Exists(ctx, "{"+prefix+"t}").Val() != 0 {
							return false
						}
					}
					return true
				})
			}
			old, err := New(pick(cl, mv.cur), append(opts, WithRestartGuard(GuardOff))...)
			if err != nil {
				t.Fatal(err)
			}
			take(old, "current set")
			joint := newClient(t, pick(cl, mv.cur), append(opts, nextOf(cl, mv.next))...)
			take(joint, "joint")
			take(old, "current set beside joint")
			take(joint, "joint again")
			// Step 2 cut short: a Client on the next set alone sees the
			// current set's Client (directly or through the joint Client's
			// relay) and refuses.
			eventually(t, "the next-set Client refuses", func() bool {
				early := newClient(t, pick(cl, mv.next), opts...)
				_, err := early.TryObtain(ctx, "t", 2*time.Second)
				return errors.Is(err, ErrConfigConflict)
			})
			_ = old.Close()
			// Step 2 done: the current set's records expire.
			time.Sleep(maxTTL + maxTTL/2 + 100*time.Millisecond)
			var next *Client
			eventually(t, "the next-set Client locks", func() bool {
				next = newClient(t, pick(cl, mv.next), opts...)
				l, err := next.TryObtain(ctx, "probe", 2*time.Second)
				if err == nil {
					_ = l.Release(ctx)
				}
				return err == nil
			})
			take(next, "next set")
			take(joint, "joint beside next")
			take(next, "next set again")
		})
	}
}

// TestMoveFloor: shrinking five nodes to three, a name whose last holder
// on the five won at nodes 2, 3 and 4 and which nobody locks in joint
// configuration: the next holder on {0,1,2} may win at 0 and 1 alone, whose
// counters are older and lower. Without the move floor its token would be
// below the last one; with it, it is above.
func TestMoveFloor(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	const maxTTL = 3 * time.Second
	opts := []Option{WithPrefix("jfloor:"), WithMaxTTL(maxTTL), WithNodeTimeout(time.Second), WithConfigRecords(true)}
	cur, next := []int{0, 1, 2, 3, 4}, []int{0, 1, 2}
	key := "{jfloor:f}"
	fence := keys.Fence(key)
	// Counters: 1000 on nodes 0 and 1, which refuse the holder on the
	// five (another's key); 5,000,000 on the others, whose equal votes
	// need no second round (which would raise nodes 0 and 1 too).
	for i := range cur {
		v := 5_000_000
		if i < 2 {
			v = 1000
			if err := cl.clients[i].Set(ctx, key, "someone else", 8*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.clients[i].Set(ctx, fence, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	old, err := New(pick(cl, cur), append(opts, WithRestartGuard(GuardOff))...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := old.TryObtain(ctx, "f", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := l.Token()
	_ = l.Release(ctx)
	joint := newClient(t, pick(cl, cur), append(opts, nextOf(cl, next))...)
	if l, err := joint.TryObtain(ctx, "other", 2*time.Second); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Release(ctx)
	}
	_ = old.Close()
	time.Sleep(maxTTL + maxTTL/2 + 100*time.Millisecond)
	// The joint Client's records raise the move floor at every round
	// that every node answers.
	eventually(t, "the move floor is written", func() bool {
		n, _ := cl.clients[0].HExists(ctx, keys.Layout{Prefix: "jfloor:"}.Configs(), keys.ConfigFloor(joint.e.rec.jointSets().NextFP)).Result()
		return n
	})
	// Nodes 0 and 1 free, node 2 held by another: the only quorum of
	// {0,1,2} is {0,1}.
	for _, i := range []int{0, 1} {
		_ = cl.clients[i].Del(ctx, key).Err()
	}
	if err := cl.clients[2].Set(ctx, key, "someone else", 8*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	nc := newClient(t, pick(cl, next), opts...)
	l, err = nc.TryObtain(ctx, "f", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	t.Logf("before %d after %d", before, l.Token())
	if l.Token() <= before {
		t.Fatalf("token %d on the next set after %d on the current set", l.Token(), before)
	}
}

// TestMoveFloorAfterLateGrants is issue 33's finding 1: shrinking five
// nodes to three with the runbook, a joint Client records (and, before
// the fix, wrote the move floor once and for all) before a Client on the
// five alone takes its grants of x, the last ones won at nodes 2, 3 and 4
// alone (nodes 0 and 1 hold another's key: their counters stay behind).
// After step 2, a Client on {0,1,2} locks x with node 2 taken, so it wins
// at nodes 0 and 1 alone: its token must be above the last grant's. In
// "joint alive" the joint Client still runs when the next-set Client
// records (it sees the move); in "joint gone" every joint Client has
// closed and its records expired, so the next-set Client has only the
// move floor that the joint Client raised while it saw the current-set
// Client's records.
func TestMoveFloorAfterLateGrants(t *testing.T) {
	for _, jointGone := range []bool{false, true} {
		name := "joint alive"
		if jointGone {
			name = "joint gone"
		}
		t.Run(name, func(t *testing.T) {
			cl := startNodes(t, 5)
			ctx := context.Background()
			const maxTTL = 2 * time.Second
			prefix := "jlate:"
			opts := []Option{WithPrefix(prefix), WithMaxTTL(maxTTL), WithNodeTimeout(500 * time.Millisecond), WithConfigRecords(true)}
			cur, next := []int{0, 1, 2, 3, 4}, []int{0, 1, 2}
			key := "{" + prefix + "x}"
			configs := keys.Layout{Prefix: prefix}.Configs()
			// Step 1: a joint Client records on every node.
			joint := newClient(t, pick(cl, cur), append(opts, nextOf(cl, next))...)
			if l, err := joint.TryObtain(ctx, "other", time.Second); err != nil {
				t.Fatal(err)
			} else {
				_ = l.Release(ctx)
			}
			eventually(t, "the joint Client writes the move floor", func() bool {
				n, _ := cl.clients[0].HExists(ctx, configs, keys.ConfigFloor(joint.e.rec.jointSets().NextFP)).Result()
				return n
			})
			old := newClient(t, pick(cl, cur), opts...)
			take := func(who string) int64 {
				t.Helper()
				// Obtain retries: the release before may not have reached
				// every node yet.
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				l, err := old.Mutex("x").Obtain(octx, time.Second)
				if err != nil {
					t.Fatalf("%s: %v", who, err)
				}
				_ = l.Release(ctx)
				return l.Token()
			}
			take("current set, every node")
			for _, i := range []int{0, 1} {
				if err := cl.clients[i].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var last int64
			for range 3 {
				last = take("current set, nodes 2 to 4")
			}
			// Step 2: the current-set Client closes; wait until its records
			// are gone and the max TTL has passed.
			_ = old.Close()
			oldSets := old.e.rec.jointSets()
			// A field is live until the expiry its value starts with (node
			// ms); record.lua deletes it only at a later call.
			gone := func(field string) bool {
				for _, c := range cl.clients {
					v, err := c.HGet(ctx, configs, field).Result()
					if errors.Is(err, redis.Nil) {
						continue
					}
					now, err2 := c.Time(ctx).Result()
					exp, _, _ := strings.Cut(v, ":")
					e, err3 := strconv.ParseInt(exp, 10, 64)
					if err != nil || err2 != nil || err3 != nil || e > now.UnixMilli() {
						return false
					}
				}
				return true
			}
			// Both of its names: its first record, folded into its first
			// acquire, named its set by address alone.
			eventually(t, "the current-set records expire", func() bool {
				return gone(keys.ConfigSingle(oldSets.CurFP)) && gone(keys.ConfigSingle(oldSets.CurAlias))
			})
			time.Sleep(maxTTL)
			if jointGone {
				_ = joint.Close()
				eventually(t, "the joint records expire", func() bool { return gone(keys.ConfigJoint(oldSets.CurFP, joint.e.rec.jointSets().NextFP)) })
			}
			// Step 3: nodes 0 and 1 free, node 2 another's.
			for _, i := range []int{0, 1} {
				_ = cl.clients[i].Del(ctx, key).Err()
			}
			if err := cl.clients[2].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			nc := newClient(t, pick(cl, next), opts...)
			l, err := nc.TryObtain(ctx, "x", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(ctx) }()
			if l.Token() <= last {
				t.Fatalf("token %d on the next set after %d, the last on the current set", l.Token(), last)
			}
		})
	}
}

// Issue 44's findings C to F on real nodes: the configuration records
// where a move meets a second move (C, D), another spelling of a node's
// address (E) and a handoff (F).

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
