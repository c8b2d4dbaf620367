package script

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

func takeHold(t *testing.T, c redis.UniversalClient, k Keys, h Hold, ttl time.Duration) Acquired {
	t.Helper()
	a, err := FamilyAcquireCall(k, h, ttl, off).Acquire(context.Background(), nodeOf(c), Ack{})
	if err != nil {
		t.Fatalf("family acquire %+v: %v", h, err)
	}
	return a
}

// giveHold releases h without retiring a token (as a clean-up does).
func giveHold(t *testing.T, c redis.UniversalClient, k Keys, h Hold) Released {
	t.Helper()
	r, err := FamilyReleaseCall(k.Lock, h, Retire{Fence: k.Fence}, "", false).Release(context.Background(), nodeOf(c))
	if err != nil {
		t.Fatalf("family release %+v: %v", h, err)
	}
	return r
}

// extendHold refreshes h, of token token.
func extendHold(t *testing.T, c redis.UniversalClient, k Keys, h Hold, token int64, ttl time.Duration) RefreshResult {
	t.Helper()
	r, err := FamilyRefresh(k, &h, token, ttl).Run(context.Background(), nodeOf(c), off)
	if err != nil {
		t.Fatalf("family refresh %+v: %v", h, err)
	}
	return r
}

// A reentrant owner's holds: each re-entry keeps the owner's token and adds
// a hold; the lock is free once the last hold is released.
func TestFamilyReentrant(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("re")
	first := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h1"}, time.Minute)
	if !first.OK() || first.Existed || first.Token <= 0 || first.Counter != first.Token {
		t.Fatalf("first acquire: %+v", first)
	}
	var holds []Hold
	for i := range 120 {
		h := Hold{Mode: 'w', Owner: "job", ID: "r" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		a := takeHold(t, c, k, h, time.Minute)
		if !a.OK() || !a.Existed || a.Token != first.Token || a.Counter != first.Token {
			t.Fatalf("re-entry %d: %+v, want existed with token %d", i, a, first.Token)
		}
		holds = append(holds, h)
	}
	if other := takeHold(t, c, k, Hold{Mode: 'w', Owner: "other", ID: "o1"}, time.Minute); other.Status != Held || other.HolderTTL <= 0 {
		t.Fatalf("another owner: %+v, want held", other)
	}
	if reader := takeHold(t, c, k, Hold{Mode: 'r', ID: "r1"}, time.Minute); reader.Status != Held {
		t.Fatalf("a reader of an exclusive lock: %+v, want held", reader)
	}
	if r := giveHold(t, c, k, Hold{Mode: 'w', Owner: "other", ID: "h1"}); r.Deleted {
		t.Fatalf("release by another owner: %+v", r)
	}
	for _, h := range holds {
		if r := giveHold(t, c, k, h); !r.Deleted {
			t.Fatalf("release of hold %s: %+v", h.ID, r)
		}
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 1 {
		t.Fatalf("the first hold is still out, but the key is gone")
	}
	if r := giveHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h1"}); !r.Deleted {
		t.Fatalf("release of the last hold: %+v", r)
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatalf("the last hold is released, but the key stays")
	}
	next := takeHold(t, c, k, Hold{Mode: 'w', Owner: "other", ID: "o2"}, time.Minute)
	if !next.OK() || next.Existed || next.Token <= first.Token {
		t.Fatalf("next owner: %+v, want a token above %d", next, first.Token)
	}
}

// Each hold expires on its own: an expired hold no longer keeps the lock,
// and its owner's refresh re-seeds it only while the lock is free or ours.
func TestFamilyHoldsExpireOnTheirOwn(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("exp")
	short := Hold{Mode: 'r', ID: "short"}
	long := Hold{Mode: 'r', ID: "long"}
	takeHold(t, c, k, short, 50*time.Millisecond)
	takeHold(t, c, k, long, time.Minute)
	time.Sleep(120 * time.Millisecond)
	// The short hold is gone: releasing it finds nothing of ours.
	if r := giveHold(t, c, k, short); r.Deleted {
		t.Fatalf("release of an expired hold: %+v", r)
	}
	if r := giveHold(t, c, k, long); !r.Deleted {
		t.Fatalf("release of the last live hold: %+v", r)
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatal("no live hold left, but the key stays")
	}
	// An exclusive owner whose only hold expired: the lock is free.
	w := Hold{Mode: 'w', Owner: "job", ID: "w"}
	takeHold(t, c, k, w, 50*time.Millisecond)
	if err := c.PExpire(ctx, k.Lock, time.Minute).Err(); err != nil { // a key outliving its holds
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond)
	if a := takeHold(t, c, k, Hold{Mode: 'r', ID: "r"}, time.Minute); !a.OK() {
		t.Fatalf("reader after the writer's hold expired: %+v", a)
	}
	// The writer's refresh may not re-seed over a reader.
	if r := extendHold(t, c, k, w, 0, time.Minute); r != NotOwner {
		t.Fatalf("writer refresh over a reader: %v", r)
	}
}

// Readers share; a writer waits for them, and readers that come after a
// writer was refused wait behind it.
func TestFamilyReadersAndWriter(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("rw")
	r1 := takeHold(t, c, k, Hold{Mode: 'r', ID: "r1"}, time.Minute)
	r2 := takeHold(t, c, k, Hold{Mode: 'r', ID: "r2"}, time.Minute)
	if !r1.OK() || !r2.OK() || r2.Token <= r1.Token || r1.Existed || r2.Existed {
		t.Fatalf("two readers: %+v %+v", r1, r2)
	}
	w := Hold{Mode: 'w', Owner: "writer", ID: "w1"}
	if a := takeHold(t, c, k, w, 2*time.Second); a.Status != Held {
		t.Fatalf("writer over readers: %+v, want held", a)
	}
	if a := takeHold(t, c, k, Hold{Mode: 'r', ID: "r3"}, time.Minute); a.Status != Held || a.HolderTTL <= 0 || a.HolderTTL > 2*time.Second {
		t.Fatalf("reader behind a waiting writer: %+v, want held for at most the writer's TTL", a)
	}
	if r := extendHold(t, c, k, Hold{Mode: 'r', ID: "r1"}, r1.Token, time.Minute); r != Extended {
		t.Fatalf("reader refresh: %v", r)
	}
	giveHold(t, c, k, Hold{Mode: 'r', ID: "r1"})
	if a := takeHold(t, c, k, w, 2*time.Second); a.Status != Held {
		t.Fatalf("writer with one reader left: %+v", a)
	}
	giveHold(t, c, k, Hold{Mode: 'r', ID: "r2"})
	wa := takeHold(t, c, k, w, time.Minute)
	if !wa.OK() || wa.Token <= r2.Token {
		t.Fatalf("writer once the readers left: %+v, want a token above %d", wa, r2.Token)
	}
	if n := c.Exists(ctx, k.Lock+":wwait").Val(); n != 0 {
		t.Fatal("the writer is in, but readers still wait for it")
	}
	giveHold(t, c, k, w)
	r4 := takeHold(t, c, k, Hold{Mode: 'r', ID: "r4"}, time.Minute)
	if !r4.OK() || r4.Token <= wa.Token {
		t.Fatalf("reader after the writer: %+v, want a token above %d", r4, wa.Token)
	}
}

// Kinds do not mix on one name: a plain lock and a lock of the family say
// which kind holds the name.
func TestFamilyKindsDoNotMix(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("kind")
	if a, err := Acquire(ctx, nodeOf(c), k, "plain", time.Minute, off, Ack{}); err != nil || !a.OK() {
		t.Fatalf("plain acquire: %+v %v", a, err)
	}
	_, err := FamilyAcquireCall(k, Hold{Mode: 'r', ID: "r"}, time.Minute, off).Acquire(ctx, nodeOf(c), Ack{})
	if err == nil || !strings.Contains(err.Error(), "REDLOCK_KIND") || !strings.Contains(err.Error(), "plain lock") {
		t.Fatalf("reader over a plain lock: %v, want REDLOCK_KIND", err)
	}
	if _, err := Release(ctx, nodeOf(c), k.Lock, "plain", Retire{Fence: k.Fence}, false, false); err != nil {
		t.Fatal(err)
	}
	takeHold(t, c, k, Hold{Mode: 'r', ID: "r"}, time.Minute)
	_, err = Acquire(ctx, nodeOf(c), k, "plain", time.Minute, off, Ack{})
	if err == nil || !strings.Contains(err.Error(), "REDLOCK_KIND") {
		t.Fatalf("plain acquire over a reader: %v, want REDLOCK_KIND", err)
	}
}

// The second round records the token where the owner holds the lock, so
// that re-entries find it, and raises the counter like Fence.
func TestSeal(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("seal")
	h := Hold{Mode: 'w', Owner: "job", ID: "h"}
	a := takeHold(t, c, k, h, time.Minute)
	if err := Seal(ctx, nodeOf(c), k, a.Token+500, "job", off); err != nil {
		t.Fatal(err)
	}
	again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h2"}, time.Minute)
	if !again.Existed || again.Token != a.Token+500 || again.Counter != a.Token+500 {
		t.Fatalf("re-entry after the seal: %+v, want token and counter %d", again, a.Token+500)
	}
	if err := Seal(ctx, nodeOf(c), k, a.Token+900, "other", off); err != nil {
		t.Fatal(err)
	}
	if again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h3"}, time.Minute); again.Token != a.Token+500 || again.Counter != a.Token+900 {
		t.Fatalf("another owner's seal changed the token: %+v", again)
	}
	// A delayed seal of an older acquire does not lower the token.
	if err := Seal(ctx, nodeOf(c), k, a.Token+100, "job", off); err != nil {
		t.Fatal(err)
	}
	if again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h4"}, time.Minute); again.Token != a.Token+500 {
		t.Fatalf("an older seal lowered the token: %+v", again)
	}
	// A re-seed records no token: a re-entry that meets it sees 0. (Its
	// token must be at or above the counter, which the other owner's seal
	// raised: a re-seed of the owner's own token would answer Retired.)
	if err := c.Del(ctx, k.Lock).Err(); err != nil {
		t.Fatal(err)
	}
	if r := extendHold(t, c, k, h, a.Token+900, time.Minute); r != Reseeded {
		t.Fatalf("refresh of a lost hold: %v, want Reseeded", r)
	}
	if again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h5"}, time.Minute); !again.Existed || again.Token != 0 {
		t.Fatalf("re-entry after a re-seed: %+v, want existed with token 0", again)
	}
}
