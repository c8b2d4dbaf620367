package script

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// removedAPI are names of an API that redlock no longer has; a script's
// error, which users read inside ErrWrongKind, must not tell them to use
// one.
var removedAPI = []string{"WithShared", "WithExclusive", "WithOwner", "ObtainPermit"}

// Each kind's acquire over each other kind on a name: REDLOCK_KIND,
// naming the handle that holds the name, and no removed API.
func TestKindErrorsNameTheHandles(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	n := nodeOf(c)
	take := map[string]func(k Keys) error{
		"plain": func(k Keys) error {
			_, err := Acquire(ctx, n, k, "v", time.Minute, off, Ack{})
			return err
		},
		"writer": func(k Keys) error {
			_, err := FamilyAcquireCall(k, Hold{Mode: 'w', Owner: "o", ID: "w"}, time.Minute, off).Acquire(ctx, n, Ack{})
			return err
		},
		"reader": func(k Keys) error {
			_, err := FamilyAcquireCall(k, Hold{Mode: 'r', ID: "r"}, time.Minute, off).Acquire(ctx, n, Ack{})
			return err
		},
		"permit": func(k Keys) error {
			_, err := PermitAcquireCall(k, Hold{Mode: 's', Permits: 2, ID: "p"}, time.Minute, off).Acquire(ctx, n, Ack{})
			return err
		},
	}
	// The handle that an error must name when the name is held by a kind.
	handle := map[string]string{"plain": "Client.Mutex", "writer": "Client.RWMutex", "reader": "Client.RWMutex", "permit": "Client.Semaphore"}
	i := 0
	for holder, hold := range take {
		for taker, try := range take {
			if holder == taker || handle[holder] == handle[taker] {
				continue
			}
			i++
			k := keys("kinds" + strconv.Itoa(i))
			if err := hold(k); err != nil {
				t.Fatalf("%s on a free name: %v", holder, err)
			}
			err := try(k)
			if err == nil || !strings.HasPrefix(err.Error(), "REDLOCK_KIND") || !strings.Contains(err.Error(), handle[holder]) {
				t.Errorf("%s over a %s: %v, want REDLOCK_KIND naming %s", taker, holder, err, handle[holder])
				continue
			}
			for _, old := range removedAPI {
				if strings.Contains(err.Error(), old) {
					t.Errorf("%s over a %s: %q names %s, which the API no longer has", taker, holder, err, old)
				}
			}
		}
	}
}

// The scripts accept on a hash only the modes they know: a hash of
// another mode (a kind a later version may add) with a live hold is
// REDLOCK_KIND for every acquire, never taken for a lock of the family or
// a semaphore.
func TestKindChecksAreWhitelists(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	n := nodeOf(c)
	k := keys("unknown-kind")
	until := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if err := c.HSet(ctx, k.Lock, "mode", "x", "h:other", until).Err(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []Hold{{Mode: 'r', ID: "r"}, {Mode: 'w', Owner: "o", ID: "w"}, {Mode: 's', Permits: 3, ID: "p"}} {
		call := FamilyAcquireCall(k, h, time.Minute, off)
		if h.Mode == 's' {
			call = PermitAcquireCall(k, h, time.Minute, off)
		}
		a, err := call.Acquire(ctx, n, Ack{})
		if err == nil || !strings.HasPrefix(err.Error(), "REDLOCK_KIND") {
			t.Errorf("acquire %c over a hash of mode x: %+v, %v; want REDLOCK_KIND", h.Mode, a, err)
		}
	}
	if a, err := Acquire(ctx, n, k, "v", time.Minute, off, Ack{}); err == nil || !strings.HasPrefix(err.Error(), "REDLOCK_KIND") {
		t.Errorf("plain acquire over a hash of mode x: %+v, %v; want REDLOCK_KIND", a, err)
	}
	if got, _ := c.HGetAll(ctx, k.Lock).Result(); len(got) != 2 {
		t.Errorf("the hash after the refused acquires: %v, want it unchanged", got)
	}
}
