package redlock

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/keys"
)

// TestAllLockSequencer is finding 8 of issue 46 on real locks: a lock of
// several names has token 0 of its own, and a fence given it fenced
// nothing. The fence refuses it with an error pointing to Parts, whose
// sequencers it accepts.
func TestAllLockSequencer(t *testing.T) {
	cl := startNodes(t, 4)
	c := newClient(t, cl.clients[:3])
	ctx := context.Background()
	l, err := c.All("a", "b").Obtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	store := fence.NewRedis(cl.clients[3])
	err = store.Set(ctx, "res", l.Sequencer(), "v")
	if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "Parts") {
		t.Fatalf("Set with an All lock's own sequencer %+v: %v, want ErrInvalid pointing to Parts", l.Sequencer(), err)
	}
	for _, p := range l.Parts() {
		s := p.Sequencer()
		if s.Lock != p.Name() || s.Kind != string(KindPlain) || s.Token != p.Token() || s.Token <= 0 {
			t.Fatalf("part %q: sequencer %+v", p.Name(), s)
		}
	}
	if err := store.Set(ctx, "res", l.Parts()[0].Sequencer(), "v"); err != nil {
		t.Fatalf("Set with a part's sequencer: %v", err)
	}
}

// checkIs fails the test unless c.Check(s) answers want (and, for Unknown,
// a *QuorumError).
func checkIs(t *testing.T, c *Client, s fence.Sequencer, want fence.Status) error {
	t.Helper()
	got, err := c.Check(context.Background(), s)
	var qe *QuorumError
	switch {
	case got != want:
		t.Fatalf("Check(%v) = %v, %v; want %v", s, got, err, want)
	case want == fence.Unknown && !errors.As(err, &qe):
		t.Fatalf("Check(%v) = %v, %v; want a *QuorumError", s, got, err)
	case want != fence.Unknown && err != nil:
		t.Fatalf("Check(%v) = %v, %v; want no error", s, got, err)
	}
	return err
}

// TestCheck: Client.Check on three real nodes answers Current for the
// lock's latest holder, Superseded after its release, after a takeover
// and for a forged sequencer (another token, above or below, another kind
// or name), and Unknown with no quorum; one node down does not change a
// Current answer.
func TestCheck(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	a, err := c.Mutex("check").Obtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sa := a.Sequencer()
	checkIs(t, c, sa, fence.Current)
	for _, forged := range []fence.Sequencer{
		{Lock: "check", Kind: "plain", Token: sa.Token + 1},
		{Lock: "check", Kind: "plain", Token: sa.Token - 1},
		{Lock: "check", Kind: "plain", Token: math.MaxInt64},
		{Lock: "check", Kind: "write", Token: sa.Token},
		{Lock: "other", Kind: "plain", Token: sa.Token},
	} {
		checkIs(t, c, forged, fence.Superseded)
	}
	t.Run("release", func(t *testing.T) {
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		checkIs(t, c, sa, fence.Superseded)
	})
	var b *Lock
	defer func() { _ = b.Release(ctx) }()
	var sb fence.Sequencer
	t.Run("takeover", func(t *testing.T) {
		old, err := c.Mutex("check").Obtain(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		checkIs(t, c, old.Sequencer(), fence.Current)
		// old stalls past its TTL; b takes the lock over.
		time.Sleep(500 * time.Millisecond)
		b, err = c.Mutex("check").Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sb = b.Sequencer()
		checkIs(t, c, old.Sequencer(), fence.Superseded)
		checkIs(t, c, sb, fence.Current)
	})
	t.Run("no quorum", func(t *testing.T) {
		// A node whose counter is not b's token (a vote that came after
		// the acquire's decision) does not say Current: freeze that one
		// first, if any, and the two that say Current still make a quorum.
		first, second := 2, 1
		for i, n := range cl.clients {
			if v, _ := n.Get(ctx, keys.Fence("{redlock:check}")).Int64(); v != sb.Token {
				first, second = i, (i+1)%3
			}
		}
		cl.pause(t, first)
		checkIs(t, c, sb, fence.Current)
		cl.pause(t, second)
		err := checkIs(t, c, sb, fence.Unknown)
		if !errors.Is(err, ErrNodeTimeout) {
			t.Errorf("Unknown with two nodes frozen: %v, want their timeouts named", err)
		}
		checkIs(t, c, fence.Sequencer{Lock: "check", Kind: "plain", Token: sb.Token + 1}, fence.Unknown)
	})
}

// TestCheckKinds: what Current means for each kind. The writer of a
// read-write lock and a reentrant owner, whose re-entry keeps its token,
// are Current while they hold; a reader, or a semaphore's permit, is
// Superseded once another reader or permit was granted after it.
func TestCheckKinds(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	obtain := func(l Locker) *Lock {
		t.Helper()
		lk, err := l.Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lk.Release(ctx) })
		return lk
	}
	reader, writer := c.RWMutex("rw")
	w := obtain(writer)
	checkIs(t, c, w.Sequencer(), fence.Current)
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	checkIs(t, c, w.Sequencer(), fence.Superseded)
	r1 := obtain(reader)
	checkIs(t, c, r1.Sequencer(), fence.Current)
	r2 := obtain(reader)
	checkIs(t, c, r2.Sequencer(), fence.Current)
	checkIs(t, c, r1.Sequencer(), fence.Superseded)
	checkIs(t, c, fence.Sequencer{Lock: "rw", Kind: "write", Token: r2.Token()}, fence.Superseded)

	o1 := obtain(c.Reentrant("re", "owner-1"))
	o2 := obtain(c.Reentrant("re", "owner-1"))
	if o1.Token() != o2.Token() {
		t.Fatalf("a re-entry's token %d, the owner's %d", o2.Token(), o1.Token())
	}
	checkIs(t, c, o2.Sequencer(), fence.Current)

	p1 := obtain(c.Semaphore("sem", 2))
	checkIs(t, c, p1.Sequencer(), fence.Current)
	p2 := obtain(c.Semaphore("sem", 2))
	checkIs(t, c, p2.Sequencer(), fence.Current)
	if p2.Token() > p1.Token() {
		checkIs(t, c, p1.Sequencer(), fence.Superseded)
	}
}

// TestCheckInvalid: what Check refuses before any I/O.
func TestCheckInvalid(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	for _, s := range []fence.Sequencer{
		{}, fence.Token(5), {Lock: "x", Kind: "plain", Token: -5}, {Lock: "x", Kind: "mutex", Token: 5},
	} {
		if st, err := c.Check(context.Background(), s); st != fence.Unknown || !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%+v) = %v, %v; want Unknown and ErrInvalid", s, st, err)
		}
	}
	var nilCtx context.Context
	if _, err := c.Check(nilCtx, fence.Sequencer{Lock: "x", Kind: "plain", Token: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Check(nil ctx): %v", err)
	}
	_ = c.Close()
	if _, err := c.Check(context.Background(), fence.Sequencer{Lock: "x", Kind: "plain", Token: 5}); !errors.Is(err, ErrClosed) {
		t.Errorf("Check after Close: %v, want ErrClosed", err)
	}
}
