package script

import (
	"context"
	"testing"
	"time"

	layout "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Every re-seed is a vote, and passes the restart guard (issue 44): on a
// node that recovers (started just now), a refresh that finds its hold
// missing from a hash that still exists answers NotReseeded and adds
// nothing, for a write hold beside another hold of its owner, a read hold
// beside another reader's and a permit beside another permit. The refresh
// of a hold the node still has extends it: refusing it would drop every
// held lock in a rolling restart.
func TestReseedOfAHoldIsGuarded(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	recovering := on
	recovering.MaxTTL = 30 * time.Second // the node recovers for the whole test
	rows := []struct {
		label      string
		kept, lost Hold
	}{
		{"write", Hold{Mode: 'w', Owner: "job", ID: "w1"}, Hold{Mode: 'w', Owner: "job", ID: "w2"}},
		{"read", Hold{Mode: 'r', ID: "r1"}, Hold{Mode: 'r', ID: "r2"}},
		{"permit", Hold{Mode: 's', Permits: 2, ID: "p1"}, Hold{Mode: 's', Permits: 2, ID: "p2"}},
	}
	for _, row := range rows {
		t.Run(row.label, func(t *testing.T) {
			k := keys("guarded-" + row.label)
			refresh := FamilyRefresh
			if row.kept.Mode == 's' {
				refresh = PermitRefresh
			}
			var token int64 // the lost hold's: the counter's value, which the re-seed's check passes
			for _, h := range []Hold{row.kept, row.lost} {
				call := FamilyAcquireCall(k, h, time.Minute, off)
				if h.Mode == 's' {
					call = PermitAcquireCall(k, h, time.Minute, off)
				}
				a, err := call.Acquire(ctx, nodeOf(c), Ack{})
				if err != nil || !a.OK() {
					t.Fatalf("taking hold %s: %+v, %v", h.ID, a, err)
				}
				token = a.Token
			}
			if err := c.HDel(ctx, k.Lock, layout.Hold(row.lost.ID)).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := refresh(k, &row.lost, token, time.Minute).Run(ctx, nodeOf(c), recovering)
			if err != nil || r != NotReseeded {
				t.Fatalf("refresh of a hold missing from the hash, on a recovering node: %v, %v; want NotReseeded", r, err)
			}
			if n, err := c.HExists(ctx, k.Lock, layout.Hold(row.lost.ID)).Result(); err != nil || n {
				t.Fatalf("the recovering node took the hold back: %v, %v", n, err)
			}
			if r, err := refresh(k, &row.kept, token, time.Minute).Run(ctx, nodeOf(c), recovering); err != nil || r != Extended {
				t.Fatalf("refresh of a hold the recovering node has: %v, %v; want Extended", r, err)
			}
			if a, err := Acquire(ctx, nodeOf(c), keys("probe"), "x", time.Second, recovering, Ack{}); err != nil || a.Status != Recovering {
				t.Fatalf("the node is not recovering: %+v, %v", a, err)
			}
		})
	}
}

// A release retires the lock's token (release.lua, retire.lua): where the
// key is ours or gone, the counter goes above the token: incremented, its
// expiry kept, when that passes the token; else set to token + 1, and
// seeded from the node's time when missing, with the counter's expiry.
// A refresh of the lock that comes after (refresh.lua) then finds its
// token retired and re-creates nothing; a later lock's token, at or above
// the counter, re-seeds as before.
func TestReleaseRetiresTheToken(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("retire")
	counter := func() int64 {
		t.Helper()
		v, err := c.Get(ctx, k.Fence).Int64()
		if err != nil {
			t.Fatalf("the counter: %v", err)
		}
		return v
	}
	release := func(value string, token int64) Released {
		t.Helper()
		r, err := Release(ctx, nodeOf(c), k.Lock, value, Retire{Fence: k.Fence, Token: token, Guard: off}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	refresh := func(token int64) RefreshResult {
		t.Helper()
		r, err := Refresh(ctx, nodeOf(c), k, "mine", token, time.Minute, off)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, err := Acquire(ctx, nodeOf(c), k, "mine", time.Minute, off, Ack{})
	if err != nil || !a.OK() {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	// Another owner's release changes nothing, the counter included.
	if r := release("theirs", a.Token); r.Deleted || counter() != a.Token {
		t.Fatalf("another owner's release: %+v, counter %d; want nothing done, %d", r, counter(), a.Token)
	}
	if err := c.PExpire(ctx, k.Fence, 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if r := release("mine", a.Token); !r.Deleted || counter() != a.Token+1 || c.PTTL(ctx, k.Fence).Val() > 20*time.Second {
		t.Fatalf("release: %+v, counter %d (PTTL %v); want deleted, counter %d with its expiry kept", r, counter(), c.PTTL(ctx, k.Fence).Val(), a.Token+1)
	}
	if r := refresh(a.Token); r != Retired {
		t.Fatalf("a refresh after the release: %v, want Retired", r)
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatal("the refresh after the release re-created the key")
	}
	// A later lock's token is at or above the counter: it re-seeds.
	if r := refresh(a.Token + 1); r != Reseeded {
		t.Fatalf("a refresh with the counter's token: %v, want Reseeded", r)
	}
	// A counter below the token (a node whose vote was not the token) is
	// set to token + 1, with the counter's expiry.
	if err := c.Set(ctx, k.Fence, a.Token-5, 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if r := release("mine", a.Token); !r.Deleted || counter() != a.Token+1 || c.PTTL(ctx, k.Fence).Val() <= 20*time.Second {
		t.Fatalf("release over a counter below the token: %+v, counter %d (PTTL %v); want %d with the counter's expiry", r, counter(), c.PTTL(ctx, k.Fence).Val(), a.Token+1)
	}
	if r := refresh(a.Token + 1); r != Reseeded {
		t.Fatalf("a refresh with the counter's token: %v, want Reseeded", r)
	}
	// A counter above the token (a later lock's) is incremented, its
	// expiry kept; a token of 0 (a clean-up's) retires nothing.
	if err := c.Set(ctx, k.Fence, a.Token+500, 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if r := release("mine", a.Token); !r.Deleted || counter() != a.Token+501 || c.PTTL(ctx, k.Fence).Val() > 10*time.Second {
		t.Fatalf("release under a later counter: %+v, counter %d (PTTL %v); want it one up, its expiry kept", r, counter(), c.PTTL(ctx, k.Fence).Val())
	}
	if err := c.Set(ctx, k.Fence, a.Token, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r := release("mine", 0); r.Deleted || counter() != a.Token {
		t.Fatalf("a release without a token: %+v, counter %d; want %d", r, counter(), a.Token)
	}
	// A release where the key is gone retires the token too (the key may
	// have expired there, and a delayed refresh would re-seed it), and
	// seeds a missing counter from the node's time, with its expiry.
	if err := c.Del(ctx, k.Fence).Err(); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli() * 1024
	if r := release("mine", a.Token); r.Deleted || counter() < before-60_000*1024 || counter() <= a.Token {
		t.Fatalf("a release onto a missing counter: %+v, counter %d; want it seeded from the clock", r, counter())
	}
	if ttl := c.PTTL(ctx, k.Fence).Val(); ttl <= 0 || ttl > off.FenceTTL {
		t.Fatalf("the seeded counter's expiry: %v, want up to %v", ttl, off.FenceTTL)
	}
	if r := refresh(a.Token); r != Retired {
		t.Fatalf("a refresh after a release onto a missing counter: %v, want Retired", r)
	}
	// A counter in the layout before counter.lua (a hash) is replaced.
	if err := c.Del(ctx, k.Fence).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, k.Fence, "v", "5", "e", "an-old-epoch").Err(); err != nil {
		t.Fatal(err)
	}
	if r := release("mine", a.Token); r.Deleted || counter() != a.Token+1 {
		t.Fatalf("a release onto a counter of the old layout: %+v, counter %d; want %d", r, counter(), a.Token+1)
	}
	// A node that lost its data has no counter: the re-seed fills it.
	if err := c.Del(ctx, k.Fence).Err(); err != nil {
		t.Fatal(err)
	}
	if r := refresh(a.Token); r != Reseeded {
		t.Fatalf("a refresh on a node without the counter: %v, want Reseeded", r)
	}
}
