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
