package script

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// nodeMs is the node's clock (TIME) in ms.
func nodeMs(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// counterOf reads a counter and its remaining time; ok is false when it is
// missing.
func counterOf(t *testing.T, c redis.UniversalClient, key string) (v int64, pttl time.Duration, ok bool) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, key).Int64()
	if err == redis.Nil {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, c.PTTL(ctx, key).Val(), true
}

// seeded checks that a counter was seeded from the node's clock between t0
// and t1 (ms): v is t x 1024 for such a t rounded down to the second
// (token.lua's seed), the key holds v, and its expiry is the counter's.
func seeded(t *testing.T, c redis.UniversalClient, key string, v, t0, t1 int64, what string) {
	t.Helper()
	lo, hi := (t0-t0%1000)*1024, (t1-t1%1000)*1024
	if v < lo || v > hi || v%(1000*1024) != 0 {
		t.Fatalf("%s: %d, want the node's time rounded down to the second x 1024, between %d and %d", what, v, lo, hi)
	}
	got, pttl, ok := counterOf(t, c, key)
	if !ok || got != v || pttl < time.Hour-time.Minute {
		t.Fatalf("%s: the counter holds %d (present %v, expiry in %v), want %d for an hour", what, got, ok, pttl, v)
	}
}

// A raise (fence.lua, seal.lua) onto a missing counter seeds it from the
// node's time first: a raise delayed past the counter's expiry cannot
// write an old token into it. A raise onto a counter never lowers it, and
// leaves a counter at or above the token as it is, expiry included.
func TestRaiseSeedsAMissingCounter(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	raises := map[string]func(k Keys, token int64){
		"fence": func(k Keys, token int64) {
			if err := Fence(ctx, nodeOf(c), k, token, off); err != nil {
				t.Fatal(err)
			}
		},
		"seal": func(k Keys, token int64) {
			if err := Seal(ctx, nodeOf(c), k, token, "job", off); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, raise := range raises {
		t.Run(name, func(t *testing.T) {
			k := keys("raise-" + name)
			// An old token onto a missing counter: the seed wins.
			t0 := nodeMs(t, c)
			raise(k, 7)
			t1 := nodeMs(t, c)
			v, _, _ := counterOf(t, c, k.Fence)
			seeded(t, c, k.Fence, v, t0, t1, "an old token raised onto a missing counter")
			// A token above the seed onto a missing counter: the token.
			if err := c.Del(ctx, k.Fence).Err(); err != nil {
				t.Fatal(err)
			}
			ahead := (nodeMs(t, c) + 3_600_000) * 1024
			raise(k, ahead)
			if got, pttl, _ := counterOf(t, c, k.Fence); got != ahead || pttl < time.Hour-time.Minute {
				t.Fatalf("a token ahead of the seed onto a missing counter: %d (expiry in %v), want %d", got, pttl, ahead)
			}
			// Below the token: raised to it. At or above: kept, expiry too.
			raise(k, ahead+5)
			if got, _, _ := counterOf(t, c, k.Fence); got != ahead+5 {
				t.Fatalf("raise to %d: counter %d", ahead+5, got)
			}
			if err := c.PExpire(ctx, k.Fence, 10*time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			raise(k, ahead)
			raise(k, ahead+5)
			if got, pttl, _ := counterOf(t, c, k.Fence); got != ahead+5 || pttl > 10*time.Minute {
				t.Fatalf("raises at or below the counter: %d (expiry in %v), want %d, expiry kept", got, pttl, ahead+5)
			}
		})
	}
}

// The votes that issue nothing (a re-entry of the family, a retried
// acquire or permit) report the counter as a token's issue sees it: a
// missing counter seeded from the node's time, one below the epoch's floor
// raised to it, and what they report is written. A counter as it is stays
// as it is, expiry included.
func TestReportedCounterAsIssued(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	owner := Hold{Mode: 'w', Owner: "job", ID: "h1"}

	t.Run("re-entry, missing counter", func(t *testing.T) {
		k := keys("re-missing")
		first := takeHold(t, c, k, owner, time.Minute)
		if err := c.Del(ctx, k.Fence).Err(); err != nil { // expired
			t.Fatal(err)
		}
		t0 := nodeMs(t, c)
		again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h2"}, time.Minute)
		t1 := nodeMs(t, c)
		if !again.Existed || again.Token != first.Token {
			t.Fatalf("re-entry: %+v, want existed with the recorded token %d", again, first.Token)
		}
		seeded(t, c, k.Fence, again.Counter, t0, t1, "a re-entry's counter, missing")
	})

	t.Run("re-entry, counter kept", func(t *testing.T) {
		k := keys("re-kept")
		first := takeHold(t, c, k, owner, time.Minute)
		if err := c.PExpire(ctx, k.Fence, 10*time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		again := takeHold(t, c, k, Hold{Mode: 'w', Owner: "job", ID: "h2"}, time.Minute)
		got, pttl, _ := counterOf(t, c, k.Fence)
		if !again.Existed || again.Counter != first.Counter || got != first.Counter || pttl > 10*time.Minute {
			t.Fatalf("re-entry: %+v; counter %d (expiry in %v); want %d, expiry not renewed", again, got, pttl, first.Counter)
		}
	})

	t.Run("re-entry, counter below the floor", func(t *testing.T) {
		pastRecovery(t, c, on)
		k := keys("re-floor")
		a, err := FamilyAcquireCall(k, owner, time.Minute, on).Acquire(ctx, nodeOf(c), Ack{})
		if err != nil || !a.OK() {
			t.Fatalf("first hold: %+v, %v", a, err)
		}
		// A counter written before the epoch began.
		if err := c.Set(ctx, k.Fence, 5, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		again, err := FamilyAcquireCall(k, Hold{Mode: 'w', Owner: "job", ID: "h2"}, time.Minute, on).Acquire(ctx, nodeOf(c), Ack{})
		if err != nil || !again.OK() || !again.Existed {
			t.Fatalf("re-entry: %+v, %v", again, err)
		}
		until, err := c.HGet(ctx, k.Epoch, "until").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := counterOf(t, c, k.Fence); again.Counter != until*1024 || got != until*1024 {
			t.Fatalf("re-entry's counter %d, the key %d; want the floor %d", again.Counter, got, until*1024)
		}
	})

	t.Run("retried acquire, missing counter", func(t *testing.T) {
		k := keys("retry")
		if a, err := Acquire(ctx, nodeOf(c), k, "mine", time.Minute, off, Ack{}); err != nil || !a.OK() {
			t.Fatalf("acquire: %+v, %v", a, err)
		}
		if err := c.Del(ctx, k.Fence).Err(); err != nil {
			t.Fatal(err)
		}
		t0 := nodeMs(t, c)
		again, err := Acquire(ctx, nodeOf(c), k, "mine", time.Minute, off, Ack{})
		t1 := nodeMs(t, c)
		if err != nil || !again.OK() {
			t.Fatalf("retried acquire: %+v, %v", again, err)
		}
		seeded(t, c, k.Fence, again.Token, t0, t1, "a retried acquire's token, counter missing")
	})

	t.Run("retried permit, missing counter", func(t *testing.T) {
		k := keys("permit-retry")
		p := Hold{Mode: 's', Permits: 2, ID: "p1"}
		if a, err := PermitAcquireCall(k, p, time.Minute, off).Acquire(ctx, nodeOf(c), Ack{}); err != nil || !a.OK() {
			t.Fatalf("permit: %+v, %v", a, err)
		}
		if err := c.Del(ctx, k.Fence).Err(); err != nil {
			t.Fatal(err)
		}
		t0 := nodeMs(t, c)
		again, err := PermitAcquireCall(k, p, time.Minute, off).Acquire(ctx, nodeOf(c), Ack{})
		t1 := nodeMs(t, c)
		if err != nil || !again.OK() {
			t.Fatalf("retried permit: %+v, %v", again, err)
		}
		seeded(t, c, k.Fence, again.Token, t0, t1, "a retried permit's token, counter missing")
	})
}

// A new lock's counters, seeded on two nodes some milliseconds apart
// within one second, give its first acquire equal tokens: the seed is the
// node's time rounded down to the second (token.lua's seed), so the votes
// agree and the token needs no second round (docs/fencing.md). Seeded from
// the millisecond, as before, the two tokens differed.
func TestNewLockSeedsAlikeWithinASecond(t *testing.T) {
	servers := redistest.Start(t, 2)
	a, b := servers[0].Client(), servers[1].Client()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ctx := context.Background()
	for try := 0; ; try++ {
		k := keys(fmt.Sprintf("new-%d", try))
		t0 := nodeMs(t, a)
		ra, err := Acquire(ctx, nodeOf(a), k, "v", time.Minute, off, Ack{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // b seeds some milliseconds later
		rb, err := Acquire(ctx, nodeOf(b), k, "v", time.Minute, off, Ack{})
		if err != nil {
			t.Fatal(err)
		}
		t1 := nodeMs(t, b)
		if t0/1000 != t1/1000 || t1-t0 < 3 {
			// A second's edge fell between them (both nodes share this
			// machine's clock): try another name.
			if try == 20 {
				t.Fatal("no two acquires within one second in 20 tries")
			}
			continue
		}
		if ra.Status != Taken || rb.Status != Taken || ra.Token != rb.Token {
			t.Fatalf("a new lock taken at %d and %d ms on two nodes: %+v and %+v, want equal tokens", t0, t1, ra, rb)
		}
		return
	}
}
