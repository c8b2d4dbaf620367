package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
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
			oldFP := old.e.rec.jointSets().CurFP
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
			eventually(t, "the current-set records expire", func() bool { return gone(keys.ConfigSingle(oldFP)) })
			time.Sleep(maxTTL)
			if jointGone {
				_ = joint.Close()
				eventually(t, "the joint records expire", func() bool { return gone(keys.ConfigJoint(oldFP, joint.e.rec.jointSets().NextFP)) })
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
