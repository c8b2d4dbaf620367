package script

import (
	"reflect"
	"testing"
	"time"
)

// A lock's fencing counter's key boxed with its LockArgs (WithFence) makes
// the same calls as without, and is used only for that key: a call for
// another counter carries its own.
func TestLockArgsWithFence(t *testing.T) {
	k := Keys{Lock: "{l}", Fence: "{l}:fence", Epoch: "e"}
	g := NewGuard('1', time.Minute, false)
	rt := Retire{Fence: k.Fence, Token: 300, Guard: g}
	plain := NewLockArgs(k.Lock, "v")
	fenced := plain.WithFence(k.Fence)
	if a, b := AcquireCall(k, plain, time.Second, g).args, AcquireCall(k, fenced, time.Second, g).args; !reflect.DeepEqual(a, b) {
		t.Errorf("acquire: %v with the fence boxed, %v without", b, a)
	}
	if a, b := ReleaseCall(plain, rt, true, false).args, ReleaseCall(fenced, rt, true, false).args; !reflect.DeepEqual(a, b) {
		t.Errorf("release: %v with the fence boxed, %v without", b, a)
	}
	other := Keys{Lock: k.Lock, Fence: "{l}:other", Epoch: k.Epoch}
	if got := AcquireCall(other, fenced, time.Second, g).args[4]; got != other.Fence {
		t.Errorf("acquire of another counter sent %v, want %q", got, other.Fence)
	}
	if got := ReleaseCall(fenced, Retire{Fence: other.Fence, Guard: g}, true, false).args[4]; got != other.Fence {
		t.Errorf("release of another counter sent %v, want %q", got, other.Fence)
	}
	// The boxed key is shared, not boxed again.
	if n := testing.AllocsPerRun(100, func() { _ = fenced.fenceArg(k.Fence) }); n != 0 {
		t.Errorf("fenceArg of the boxed key: %v allocations, want 0", n)
	}
	// A release boxes only its token, besides its argument slice: its
	// publish flag is boxed from constants.
	for _, c := range []struct{ publish, sharded bool }{{true, false}, {true, true}, {false, false}} {
		if n := testing.AllocsPerRun(100, func() { _ = ReleaseCall(fenced, rt, c.publish, c.sharded) }); n != 2 {
			t.Errorf("ReleaseCall(publish %v, sharded %v): %v allocations, want 2", c.publish, c.sharded, n)
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
	a := NewLockArgs(k.Lock, "v").WithFence(k.Fence)
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
