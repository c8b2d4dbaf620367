package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// TestIdentifyTwinMatchesScript holds the model's id.lua twin
// (Data.Identify) to the script on a real redis-server: random first
// contacts, reads, and losses of the data set (the identity key deleted,
// as a restart without data does; or kept, as a restart with the data, a
// snapshot or a replica does). The script's identities are random strings
// and the model's numbers: each must keep its identity while the key
// lives, and take a new one, never an earlier one, after it is lost.
func TestIdentifyTwinMatchesScript(t *testing.T) {
	seed := seedOf(t)
	t.Logf("seed %d (replay: %s=%d)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 44))
	srv := redistest.Start(t, 1)[0]
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	node := goredis.New(c)
	ctx := context.Background()
	key := keys.Layout{Prefix: "d"}.NodeID()
	var twin Data
	next := 1
	seenReal, seenModel := map[string]bool{}, map[int]bool{}
	lastReal, lastModel := "", 0
	cover := map[string]int{}
	for step := range 300 {
		if rng.IntN(4) == 0 {
			// The data set is lost: a restart without data.
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			twin = Data{}
			cover["lost"]++
		}
		id, err := script.Identify(ctx, node, key)
		if err != nil {
			t.Fatal(err)
		}
		got := twin.Identify(next)
		if got == next {
			next++
		}
		newReal, newModel := id.ID != lastReal, got != lastModel
		if newReal != newModel || (newReal && (seenReal[id.ID] || seenModel[got])) {
			t.Fatalf("step %d: script %q (before %q), twin %d (before %d)", step, id.ID, lastReal, got, lastModel)
		}
		if newReal {
			cover["new"]++
		} else {
			cover["kept"]++
		}
		seenReal[id.ID], seenModel[got] = true, true
		lastReal, lastModel = id.ID, got
	}
	t.Logf("cover: %v", cover)
	for _, k := range []string{"lost", "new", "kept"} {
		if cover[k] == 0 {
			t.Errorf("no step with %s", k)
		}
	}
}

// TestNodeCheckTwinMatchesScripts holds the model's identity check
// (Data.NodeIs and checksNode, which the model's nodes run before every
// request: OtherNode) to epoch.lua's node_is on a real redis-server: random
// first contacts, losses of the data set (FLUSHALL, a restart without
// data), and requests of each kind that name no identity, the node's own,
// an identity it had before a loss, or another node's. A request that can
// give a vote (an acquire of each kind, a refresh, a record round) passes
// when it names none or the node's own, and is refused otherwise
// (REDLOCK_NODE with the node's identity, or '-' when it has none) with
// nothing written, the epoch record included, as the model's refused
// request writes nothing; the second round's raise (fence.lua) checks
// nothing, as in the model.
func TestNodeCheckTwinMatchesScripts(t *testing.T) {
	seed := seedOf(t)
	t.Logf("seed %d (replay: %s=%d)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 4444))
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	node := goredis.New(c)
	ctx := context.Background()
	idKey := keys.Layout{Prefix: "d"}.NodeID() // beside diffKeys.Epoch
	fam := script.Keys{Lock: "{f}", Fence: "{f}:fence", Epoch: diffKeys.Epoch}
	perm := script.Keys{Lock: "{p}", Fence: "{p}:fence", Epoch: diffKeys.Epoch}
	const other = 1 << 20 // another node's identity, in the model
	var twin Data
	next := 1
	names := map[int]string{other: "0123456789abcdef"} // the model's identities, as the script's
	var earlier []int                                  // the identities the node had before a loss
	cover := map[string]int{}
	snapshot := func() map[string]snapKey {
		ks, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]snapKey{}
		for _, k := range ks {
			dump, _ := c.Dump(ctx, k).Result()
			exp, _ := c.Do(ctx, "PEXPIRETIME", k).Int64()
			out[k] = snapKey{dump, exp}
		}
		return out
	}
	type op struct {
		name string
		kind int
		run  func(g script.Guard) error
	}
	ttl := 200 * time.Millisecond
	ops := []op{
		{"acquire", ReqAcquire, func(g script.Guard) error {
			_, err := script.Acquire(ctx, node, diffKeys, "v"+strconv.Itoa(1+rng.IntN(2)), ttl, g, script.Ack{})
			return err
		}},
		{"refresh", ReqRefresh, func(g script.Guard) error {
			_, err := script.Refresh(ctx, node, diffKeys, "v"+strconv.Itoa(1+rng.IntN(2)), rng.Int64N(1<<40), ttl, g)
			return err
		}},
		{"record", ReqRecord, func(g script.Guard) error {
			_, err := script.Record(ctx, node, "{d}:configs", diffKeys.Epoch, g, []script.RecordField{{Name: "c:x", TTL: time.Second}}, nil)
			return err
		}},
		{"family acquire", ReqAcquire, func(g script.Guard) error {
			h := script.Hold{Mode: 'w', Owner: "o", ID: "h" + strconv.Itoa(rng.IntN(2))}
			_, err := script.FamilyAcquireCall(fam, h, ttl, g).Acquire(ctx, node, script.Ack{})
			return err
		}},
		{"permit acquire", ReqAcquire, func(g script.Guard) error {
			h := script.Hold{Mode: 's', Permits: 2, ID: "p" + strconv.Itoa(rng.IntN(3))}
			_, err := script.PermitAcquireCall(perm, h, ttl, g).Acquire(ctx, node, script.Ack{})
			return err
		}},
		{"fence", ReqFence, func(g script.Guard) error {
			return script.Fence(ctx, node, diffKeys, rng.Int64N(1<<40), g)
		}},
	}
	for step := range 400 {
		switch rng.IntN(8) {
		case 0: // the data set is lost
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if twin.ID != 0 {
				earlier = append(earlier, twin.ID)
			}
			twin = Data{}
			cover["lost"]++
		case 1, 2: // a (first) contact
			id, err := script.Identify(ctx, node, idKey)
			if err != nil {
				t.Fatal(err)
			}
			got := twin.Identify(next)
			if got == next {
				names[got] = id.ID
				next++
			}
			if names[got] != id.ID {
				t.Fatalf("step %d: the script's identity %s, the twin's %d (%s)", step, id.ID, got, names[got])
			}
		}
		ids := []int{0, other}
		if twin.ID != 0 {
			ids = append(ids, twin.ID, twin.ID)
		}
		if len(earlier) > 0 {
			ids = append(ids, earlier[rng.IntN(len(earlier))])
		}
		id := ids[rng.IntN(len(ids))]
		// The guard off: with it on, a recovering node says so before the
		// check (epoch.lua's epoch), which the guard's twins cover; here the
		// check alone, which does not depend on the guard.
		g := script.Guard{MaxTTL: 100 * time.Millisecond, Delta: 20 * time.Millisecond, Mode: '0', FenceTTL: time.Minute}.ForNode(names[id])
		o := ops[rng.IntN(len(ops))]
		before := snapshot()
		err := o.run(g)
		refused := script.IsOtherNode(err)
		if err != nil && !refused {
			t.Fatalf("step %d: %s: %v", step, o.name, err)
		}
		want := checksNode(o.kind) && !twin.NodeIs(id)
		which := map[bool]string{true: "refused", false: "passed"}
		named := map[bool]string{true: "its own", false: "another"}[id == twin.ID]
		switch {
		case id == 0:
			named = "none"
		case twin.ID == 0:
			named = "one, on a node without any" // its data lost
		}
		cover[fmt.Sprintf("%s naming %s: %s", o.name, named, which[refused])]++
		if refused != want {
			t.Fatalf("step %d: %s naming identity %q (the twin's %d) on a node of %q (the twin's %d): script %s (%v), twin %s",
				step, o.name, names[id], id, names[twin.ID], twin.ID, which[refused], err, which[want])
		}
		if !refused {
			continue
		}
		had := "-"
		if twin.ID != 0 {
			had = names[twin.ID]
		}
		if f := strings.Fields(err.Error()); len(f) < 2 || f[1] != had {
			t.Errorf("step %d: %s refused with %q, want REDLOCK_NODE %s", step, o.name, err, had)
		}
		// A key of the short TTLs here may expire between the two
		// snapshots, or during the second, on a loaded machine: that is
		// Redis's expiry, not a write of the refused request. Compare
		// what outlived the second snapshot.
		after := snapshot()
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if unexpired(before, now) != unexpired(after, now) {
			t.Fatalf("step %d: %s, refused, wrote:\nbefore %v\nafter  %v", step, o.name, before, after)
		}
	}
	t.Logf("cover: %v", cover)
	lostID := 0
	for k, n := range cover {
		if strings.HasSuffix(k, "naming one, on a node without any: refused") {
			lostID += n
		}
	}
	if lostID == 0 {
		t.Error("no vote naming an identity on a node that lost its own")
	}
	for _, k := range []string{"lost", "acquire naming another: refused", "acquire naming none: passed",
		"acquire naming its own: passed", "refresh naming another: refused", "record naming another: refused",
		"family acquire naming another: refused", "permit acquire naming another: refused", "fence naming another: refused"} {
		if cover[k] == 0 {
			t.Errorf("no step with %s", k)
		}
	}
}

// snapKey is a key's DUMP and its PEXPIRETIME (-1: none, -2: missing, as
// read between KEYS and DUMP).
type snapKey struct {
	dump  string
	until int64
}

func (k snapKey) String() string { return fmt.Sprintf("%q until %d", k.dump, k.until) }

// unexpired prints the keys of a snapshot that had not expired at now (a
// node time), sorted by name.
func unexpired(snap map[string]snapKey, now time.Time) string {
	names := make([]string, 0, len(snap))
	for k, v := range snap {
		if v.until == -1 || v.until > now.UnixMilli() {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s:%v ", k, snap[k])
	}
	return b.String()
}
