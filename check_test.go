package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/fence"
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
