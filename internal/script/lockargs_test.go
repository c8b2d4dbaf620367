package script

import (
	"reflect"
	"testing"
	"time"
)

// A release call allocates its argument slice, the fencing counter's key
// and the token boxed: its publish flag is boxed from constants.
func TestReleaseCallAllocations(t *testing.T) {
	g := NewGuard('1', time.Minute, false)
	rt := Retire{Fence: "{l}:fence", Token: 300, Guard: g}
	a := NewLockArgs("{l}", "v")
	for _, c := range []struct{ publish, sharded bool }{{true, false}, {true, true}, {false, false}} {
		if n := testing.AllocsPerRun(100, func() { _ = ReleaseCall(a, rt, c.publish, c.sharded) }); n != 3 {
			t.Errorf("ReleaseCall(publish %v, sharded %v): %v allocations, want 3", c.publish, c.sharded, n)
		}
	}
}

// A node's epoch record's key boxed with its Guard (WithEpoch) makes the
// same acquire calls as without, and is used only for that key.
func TestGuardWithEpoch(t *testing.T) {
	k := Keys{Lock: "{l}", Fence: "{l}:fence", Epoch: "e"}
	g := NewGuard('1', time.Minute, false)
	ge := g.WithEpoch(k.Epoch)
	h := Hold{Mode: 'w', Owner: "o", ID: "id", Permits: 2, Wait: "w"}
	a := NewLockArgs(k.Lock, "v")
	for _, c := range []struct {
		name string
		call func(Guard) Call
	}{
		{"acquire", func(g Guard) Call { return AcquireCall(k, a, time.Second, g) }},
		{"family", func(g Guard) Call { return FamilyAcquireCall(k, h, time.Second, g) }},
		{"permit", func(g Guard) Call { return PermitAcquireCall(k, h, time.Second, g) }},
	} {
		if x, y := c.call(g).args, c.call(ge).args; !reflect.DeepEqual(x, y) {
			t.Errorf("%s: %v with the epoch key boxed, %v without", c.name, y, x)
		}
		if got := c.call(g.WithEpoch("other")).args[5]; got != k.Epoch {
			t.Errorf("%s with another node's epoch key boxed sent %v, want %q", c.name, got, k.Epoch)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ge.epochArg(k.Epoch) }); n != 0 {
		t.Errorf("epochArg of the boxed key: %v allocations, want 0", n)
	}
	gn := ge.ForNode("id") // a guard after the node's identity is learnt
	if n := testing.AllocsPerRun(100, func() { _ = gn.epochArg(k.Epoch) }); n != 0 {
		t.Errorf("epochArg after ForNode: %v allocations, want 0", n)
	}
}
