//go:build linux && amd64

package procclock

import (
	"testing"
	"time"
)

// TestJump moves both clocks of this process, forward and back, and checks
// what time.Now, time.Since and a timer see, against the kernel's clocks.
func TestJump(t *testing.T) {
	if err := Install(); err != nil {
		t.Fatal(err)
	}
	defer func() { Jump(Realtime, -Offset(Realtime)); Jump(Monotonic, -Offset(Monotonic)) }()
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -100*time.Millisecond || d > 100*time.Millisecond {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	for _, d := range []time.Duration{time.Hour, -3 * time.Hour, 5 * time.Hour} {
		Jump(Realtime, d)
		near("wall offset", time.Duration(time.Now().UnixNano()-RealNow().UnixNano()), Offset(Realtime))
		if Offset(Realtime) == 0 {
			t.Fatal("no offset")
		}
	}
	start, mono0 := time.Now(), MonoNow()
	Jump(Monotonic, 10*time.Second)
	near("time.Since after a monotonic jump forward", time.Since(start), time.Duration(MonoNow()-mono0)+10*time.Second)
	Jump(Monotonic, -10*time.Second-500*time.Millisecond)
	near("time.Since after a monotonic jump back", time.Since(start), time.Duration(MonoNow()-mono0)-500*time.Millisecond)
	// A timer of 50 ms, set now, fires after 50 ms of real time.
	m := MonoNow()
	time.Sleep(50 * time.Millisecond)
	if got := time.Duration(MonoNow() - m); got < 50*time.Millisecond || got > 2*time.Second {
		t.Errorf("a 50ms sleep took %v of real time", got)
	}
}
