package script

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	layout "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The restart guard's coverage (issue 44, "Every vote passes the guard").
// Every script this package registers has a row here, and a script added
// later without one fails TestGuardCoverage. A row is of one of three
// classes:
//
//   - vote: the script can create or transfer a vote (an acquire of any
//     kind, a refresh that re-seeds a missing key or hold, a claim, a
//     record round, a check of a sequencer). On a node that recovers, with
//     the state on which it would vote, it must answer "recovering" and
//     change nothing but the node's epoch record.
//   - extend: the refresh of a key or hold the node still has. It passes
//     on a recovering node: the node kept the lock, so it forgot nothing
//     of it, and refusing would drop every held lock in a rolling restart
//     (docs/safety.md, section 9).
//   - other: the script gives no vote; why says what it does instead.
type guardRow struct {
	label  string
	script *luaScript
	class  guardClass
	why    string // other's reason
	// run prepares, with the guard off, the state on which the script
	// would vote (or which it extends), then runs the script with guard g
	// on node n and reports whether the node refused (voted nothing) or,
	// for an extend, whether it extended.
	setup func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64
	run   func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool
}

type guardClass int

const (
	voteRow guardClass = iota
	extendRow
	otherRow
)

// heldPlain holds k's plain lock with value "old" (the guard off) and
// returns its token.
func heldPlain(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
	t.Helper()
	a, err := Acquire(ctx, n, k, "old", time.Minute, off, Ack{})
	if err != nil || !a.OK() {
		t.Fatalf("holding %s: %+v, %v", k.Lock, a, err)
	}
	return a.Token
}

// heldHold returns a setup that takes hold h of k (the guard off).
func heldHold(h Hold) func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
	return func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
		t.Helper()
		call := FamilyAcquireCall(k, h, time.Minute, off)
		if h.Mode == layout.ModePermit {
			call = PermitAcquireCall(k, h, time.Minute, off)
		}
		a, err := call.Acquire(ctx, n, Ack{})
		if err != nil || !a.OK() {
			t.Fatalf("holding %s of %s: %+v, %v", h.ID, k.Lock, a, err)
		}
		return a.Token
	}
}

// lost is setup with the lock's key then deleted: a node that lost the
// lock (a restart without it), which keeps the counter at the token.
func lost(setup func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64) func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
	return func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
		t.Helper()
		token := setup(t, ctx, n, k)
		if _, err := n.Do(ctx, "DEL", k.Lock); err != nil {
			t.Fatal(err)
		}
		return token
	}
}

// counterAt sets k's counter to a token (a lock that was taken and is
// gone) and returns it.
func counterAt(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
	t.Helper()
	token := time.Now().UnixMilli() * 1024
	if _, err := n.Do(ctx, "SET", k.Fence, token); err != nil {
		t.Fatal(err)
	}
	return token
}

var (
	writeHold  = Hold{Mode: layout.ModeWrite, Owner: "job", ID: "w1"}
	readHold   = Hold{Mode: layout.ModeRead, ID: "r1"}
	permitHold = Hold{Mode: layout.ModePermit, Permits: 2, ID: "p1"}
)

// refusedAsOtherNode is set when a row's script answered the identity
// check's refusal (IsOtherNode), which only TestIdentityCoverage provokes
// (TestGuardCoverage's guards name no node). The tests of this file are
// not parallel.
var refusedAsOtherNode bool

// answered fails the test on err, but for the identity check's refusal,
// which it notes in refusedAsOtherNode; it reports whether the script
// answered.
func answered(t *testing.T, err error) bool {
	t.Helper()
	if IsOtherNode(err) {
		refusedAsOtherNode = true
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func acquired(t *testing.T, a Acquired, err error) bool {
	t.Helper()
	return answered(t, err) && a.Status == Recovering
}

func refreshed(t *testing.T, want RefreshResult) func(RefreshResult, error) bool {
	return func(r RefreshResult, err error) bool {
		t.Helper()
		return answered(t, err) && r == want
	}
}

func claimed(t *testing.T, c Claim, err error) bool {
	t.Helper()
	return answered(t, err) && c.Status == ClaimRecovering
}

func guardRows() []guardRow {
	var rows []guardRow
	// The acquires, each as FCALL (the library's) where it has one, and
	// as EVALSHA.
	rows = append(rows,
		guardRow{label: "acquire/fcall", script: &acquire, class: voteRow, setup: counterAt,
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				a, err := AcquireCall(k, NewLockArgs(k.Lock, "new"), time.Minute, g).Acquire(ctx, n, Ack{})
				return acquired(t, a, err)
			}},
		guardRow{label: "acquire/evalsha", script: &acquire, class: voteRow, setup: counterAt,
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				call := AcquireCall(k, NewLockArgs(k.Lock, "new"), time.Minute, g)
				call.args = withHead(call.args, acquire.boxed())
				a, err := call.Acquire(ctx, n, Ack{})
				return acquired(t, a, err)
			}},
		guardRow{label: "family acquire", script: &familyAcquire, class: voteRow, setup: counterAt,
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				a, err := FamilyAcquireCall(k, writeHold, time.Minute, g).Acquire(ctx, n, Ack{})
				return acquired(t, a, err)
			}},
		guardRow{label: "family acquire, a reader beside one", script: &familyAcquire, class: voteRow, setup: heldHold(readHold),
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				a, err := FamilyAcquireCall(k, Hold{Mode: layout.ModeRead, ID: "r2"}, time.Minute, g).Acquire(ctx, n, Ack{})
				return acquired(t, a, err)
			}},
		guardRow{label: "permit acquire", script: &permitAcquire, class: voteRow, setup: heldHold(permitHold),
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				a, err := PermitAcquireCall(k, Hold{Mode: layout.ModePermit, Permits: 2, ID: "p2"}, time.Minute, g).Acquire(ctx, n, Ack{})
				return acquired(t, a, err)
			}},
	)
	// The refreshes: a re-seed is a vote, an extension is not.
	rows = append(rows,
		guardRow{label: "refresh, re-seed", script: &refresh, class: voteRow, setup: lost(heldPlain),
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
				return refreshed(t, NotReseeded)(Refresh(ctx, n, k, "old", token, time.Minute, g))
			}},
		guardRow{label: "refresh, extend", script: &refresh, class: extendRow, setup: heldPlain,
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
				return refreshed(t, Extended)(Refresh(ctx, n, k, "old", token, time.Minute, g))
			}},
	)
	for _, h := range []Hold{writeHold, readHold, permitHold} {
		script, item := &familyRefresh, FamilyRefresh
		if h.Mode == layout.ModePermit {
			script, item = &permitRefresh, PermitRefresh
		}
		h := h
		rows = append(rows,
			guardRow{label: "refresh of a " + ClaimKind(&h) + " hold, re-seed", script: script, class: voteRow, setup: lost(heldHold(h)),
				run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
					return refreshed(t, NotReseeded)(item(k, &h, token, time.Minute).Run(ctx, n, g))
				}},
			guardRow{label: "refresh of a " + ClaimKind(&h) + " hold, extend", script: script, class: extendRow, setup: heldHold(h),
				run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
					return refreshed(t, Extended)(item(k, &h, token, time.Minute).Run(ctx, n, g))
				}},
		)
	}
	// The claims of a handed-off lock, of each kind.
	rows = append(rows, guardRow{label: "claim of a plain lock", script: &resume, class: voteRow, setup: heldPlain,
		run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
			c, err := ClaimCall(k, nil, "old", "new", token, g).Claim(ctx, n)
			return claimed(t, c, err)
		}})
	for _, h := range []Hold{writeHold, readHold, permitHold} {
		h := h
		rows = append(rows, guardRow{label: "claim of a " + ClaimKind(&h) + " hold", script: &resume, class: voteRow, setup: heldHold(h),
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
				c, err := ClaimCall(k, &h, h.ID, "new", token, g).Claim(ctx, n)
				return claimed(t, c, err)
			}})
	}
	rows = append(rows,
		guardRow{label: "record round", script: &record, class: voteRow,
			setup: func(t *testing.T, ctx context.Context, n driver.Node, k Keys) int64 {
				t.Helper()
				// A record a Client wrote before the restart (kept, or restored).
				if _, err := n.Do(ctx, "HSET", k.Lock+":records", "c:A", "99999999999999"); err != nil {
					t.Fatal(err)
				}
				return 0
			},
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, _ int64, g Guard) bool {
				r, err := Record(ctx, n, k.Lock+":records", k.Epoch, g,
					[]RecordField{{Name: "c:B", TTL: time.Minute}}, []FloorRaise{{Name: "f:B", Ahead: time.Minute, TTL: time.Minute}})
				return answered(t, err) && r.Recovering > 0 && r.Fields == nil
			}},
		guardRow{label: "check of a sequencer", script: &checkSeq, class: voteRow, setup: heldPlain,
			run: func(t *testing.T, ctx context.Context, n driver.Node, k Keys, token int64, g Guard) bool {
				s, err := CheckSeqCall(k, 'p', token, g).CheckSeq(ctx, n)
				return answered(t, err) && s.Standing == SeenRecovering
			}},
	)
	// The scripts that give no vote.
	rows = append(rows,
		guardRow{label: "release", script: &release, class: otherRow,
			why: "deletes the lock's key where it is ours and retires its token (the counter only rises): it takes a vote away, never gives one"},
		guardRow{label: "family release", script: &familyRelease, class: otherRow,
			why: "deletes a hold and retires its token: takes a vote away"},
		guardRow{label: "permit release", script: &permitRelease, class: otherRow,
			why: "deletes a permit and retires its token: takes a vote away"},
		guardRow{label: "withdraw", script: &withdraw, class: otherRow,
			why: "deletes a waiting writer's own mark: readers stop waiting behind it; no hold is created"},
		guardRow{label: "fence", script: &fence, class: otherRow,
			why: "the acquire's second round raises the counter to a token a quorum granted: a counter only rises, and a higher one grants nothing"},
		guardRow{label: "seal", script: &seal, class: otherRow,
			why: "the family acquire's second round: raises the counter, and the owner's recorded token where the owner holds the lock already; no hold is created"},
		guardRow{label: "identify", script: &identify, class: otherRow,
			why: "reads (or creates once) the node's identity key; a node's identity survives its restarts and counts nothing (docs/reconfiguration.md, \"A node's identity\")"},
	)
	return rows
}

// keyspace is every key of the node but the epoch record's (epoch, its
// fast path), each with its DUMP and its PTTL.
func keyspace(t *testing.T, c *redis.Client, epoch string) map[string][2]any {
	t.Helper()
	ctx := context.Background()
	ks, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]any{}
	for _, k := range ks {
		if k == epoch || k == layout.Trusted(epoch) {
			continue
		}
		d, err := c.Dump(ctx, k).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = [2]any{d, ttl}
	}
	return out
}

// TestGuardCoverage runs every row of guardRows on a node that recovers
// (started just now, with a max TTL longer than the test): each vote
// answers "recovering" and changes nothing but the epoch record, each
// extension passes; and every registered script has a row.
func TestGuardCoverage(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	recovering := on
	recovering.MaxTTL = time.Minute
	rows := guardRows()
	covered := map[string]bool{}
	for i, row := range rows {
		covered[row.script.src] = true
		if row.class == otherRow {
			if row.why == "" {
				t.Errorf("%s: a script that gives no vote needs its reason", row.label)
			}
			continue
		}
		t.Run(row.label, func(t *testing.T) {
			k := keys("cov" + string(rune('a'+i)))
			token := row.setup(t, ctx, n, k)
			before := keyspace(t, c, k.Epoch)
			ok := row.run(t, ctx, n, k, token, recovering)
			switch row.class {
			case voteRow:
				if !ok {
					t.Fatal("a recovering node voted (or answered other than recovering)")
				}
				after := keyspace(t, c, k.Epoch)
				for key, b := range before {
					a, found := after[key]
					if !found || a[0] != b[0] || a[1].(time.Duration) > b[1].(time.Duration) {
						t.Errorf("key %s changed: %v, was %v", key, a, b)
					}
				}
				for key := range after {
					if _, found := before[key]; !found {
						t.Errorf("key %s was written", key)
					}
				}
			case extendRow:
				if !ok {
					t.Fatal("the refresh of a lock the recovering node kept did not extend it")
				}
			}
		})
	}
	if refusedAsOtherNode {
		t.Error("a script refused as another node, with a guard that names none")
	}
	// Still recovering: every row ran inside the window.
	if a, err := Acquire(ctx, n, keys("cov-probe"), "x", time.Second, recovering, Ack{}); err != nil || a.Status != Recovering {
		t.Errorf("the node is not recovering any more: %+v, %v", a, err)
	}
	for i, src := range registered {
		if !covered[src] {
			t.Errorf("registered script %d (%d bytes, ending %q) has no row in guardRows: say whether it votes", i, len(src), src[max(0, len(src)-60):])
		}
	}
}

// TestIdentityCoverage runs every vote and every extension of guardRows
// with a guard that names another node than the server's identity (issue
// 44: an address that reaches another server than at the first contact):
// each is refused with REDLOCK_NODE (IsOtherNode) and changes nothing but
// the epoch record (epoch.lua's node_is runs before any other write).
// With the server's own identity the same rows pass the check, and a
// server that lost its identity (its data) refuses every identity.
func TestIdentityCoverage(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	idKey := "{}:id" // the identity beside keys()' epoch record ({}:epoch)
	self, err := Identify(ctx, n, idKey)
	if err != nil {
		t.Fatal(err)
	}
	// The guard off: a node that is not recovering, so that a row that
	// passed the check would vote; the check does not depend on the guard.
	other, own := off.ForNode("0123456789abcdef"), off.ForNode(self.ID)
	for i, row := range guardRows() {
		if row.class == otherRow {
			continue
		}
		t.Run(row.label, func(t *testing.T) {
			for _, g := range []Guard{other, own} {
				k := keys("id" + string(rune('a'+i)) + g.Node)
				token := row.setup(t, ctx, n, k)
				before := keyspace(t, c, k.Epoch)
				refusedAsOtherNode = false
				row.run(t, ctx, n, k, token, g)
				if g.Node == self.ID {
					if refusedAsOtherNode {
						t.Errorf("refused with the server's own identity")
					}
					continue
				}
				if !refusedAsOtherNode {
					t.Fatalf("answered with another node's identity %s (the server's is %s)", g.Node, self.ID)
				}
				after := keyspace(t, c, k.Epoch)
				for key, b := range before {
					if a, found := after[key]; !found || a[0] != b[0] || a[1].(time.Duration) > b[1].(time.Duration) {
						t.Errorf("key %s changed: %v, was %v", key, a, b)
					}
				}
				for key := range after {
					if _, found := before[key]; !found {
						t.Errorf("key %s was written", key)
					}
				}
			}
		})
	}
	// An acquire's second round raises the token on a quorum, as votes
	// make it: on the node identified only.
	k := keys("id-raise")
	for _, g := range []Guard{other, own} {
		ferr, serr := Fence(ctx, n, k, 5, g), Seal(ctx, n, k, 5, "job", g)
		if g.Node == self.ID {
			if ferr != nil || serr != nil {
				t.Errorf("the raises with the server's own identity: %v, %v", ferr, serr)
			}
			continue
		}
		if !IsOtherNode(ferr) || !IsOtherNode(serr) {
			t.Errorf("the raises with another node's identity: %v, %v", ferr, serr)
		}
		if v, err := n.Do(ctx, "EXISTS", k.Fence); err != nil || v != int64(0) {
			t.Errorf("a raise refused wrote the counter: %v, %v", v, err)
		}
	}
	// A server that lost its data has no identity: every one is refused.
	if _, err := n.Do(ctx, "DEL", idKey); err != nil {
		t.Fatal(err)
	}
	_, err = AcquireCall(keys("id-lost"), NewLockArgs("{id-lost}", "v"), time.Minute, own).Acquire(ctx, n, Ack{})
	if !IsOtherNode(err) || !strings.Contains(err.Error(), "REDLOCK_NODE -") {
		t.Errorf("a server without its identity answered %v, want REDLOCK_NODE -", err)
	}
}
