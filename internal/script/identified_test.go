package script

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestAcquireIdentified: an acquire with the node's identity read after
// it, in its pipeline, takes the lock as Acquire does and reads the
// identity Identify reads: on a fresh server (no identity, no library:
// the pipeline is sent again after the library's load), again on the same
// server where another holds the lock, with WAIT in the pipeline, and
// after FUNCTION FLUSH.
func TestAcquireIdentified(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	const idKey = "{}:id"
	call := func(name string) Call {
		k := keys(name)
		return AcquireCall(k, NewLockArgs(k.Lock, "v-"+name), time.Minute, off)
	}

	a, id, idErr, err := call("first").AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || !a.OK() {
		t.Fatalf("fresh server: %+v, %+v, %v, %v", a, id, idErr, err)
	}
	self, err := Identify(ctx, n, idKey)
	if err != nil {
		t.Fatal(err)
	}
	if id != self || id.RunID == "" {
		t.Fatalf("identity read with the acquire %+v, Identify %+v", id, self)
	}
	if v, err := c.Get(ctx, keys("first").Lock).Result(); err != nil || v != "v-first" {
		t.Fatalf("lock key: %q, %v", v, err)
	}

	// Held: the acquire's answer is a no, the identity is still read.
	k := keys("first")
	held, id2, idErr2, err2 := AcquireCall(k, NewLockArgs(k.Lock, "other"), time.Minute, off).AcquireIdentified(ctx, n, Ack{}, idKey)
	if err2 != nil || idErr2 != nil || held.Status != Held || id2 != self {
		t.Fatalf("held: %+v, %+v, %v, %v", held, id2, idErr2, err2)
	}

	// With WAIT (no replicas: taken, not replicated).
	a, id, idErr, err = call("acked").AcquireIdentified(ctx, n, Ack{Replicas: 1, Timeout: time.Millisecond}, idKey)
	if err != nil || idErr != nil || a.Status != Taken || !a.Unreplicated || id != self {
		t.Fatalf("with WAIT: %+v, %+v, %v, %v", a, id, idErr, err)
	}

	// The library gone: loaded again, the pipeline sent again.
	if err := c.Do(ctx, "FUNCTION", "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	a, id, idErr, err = call("flushed").AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || !a.OK() || id != self {
		t.Fatalf("after FUNCTION FLUSH: %+v, %+v, %v, %v", a, id, idErr, err)
	}
}
