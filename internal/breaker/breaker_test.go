package breaker

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestOpenProbeClose(t *testing.T) {
	var b Breaker
	if b.State() != Closed || b.Closings() != 0 {
		t.Fatalf("zero value: %v, %d closings", b.State(), b.Closings())
	}
	now := time.Now()
	stop, ok := b.Open(now, time.Millisecond, 50*time.Millisecond)
	if !ok || b.State() != Open {
		t.Fatalf("Open: %v, state %v", ok, b.State())
	}
	if _, again := b.Open(now, time.Millisecond, time.Second); again {
		t.Fatal("an open breaker opened again")
	}
	if st, at := b.NextProbe(); st != Open || !at.Equal(now.Add(time.Millisecond)) {
		t.Fatalf("NextProbe %v %v", st, at)
	}
	_, changed := b.Changed()
	var mu sync.Mutex
	var seen []string
	probes := 0
	b.ProbeLoop(stop, Prober{
		Cooldown: time.Millisecond,
		Now:      time.Now,
		Probe: func(timeout time.Duration) bool {
			if timeout != 50*time.Millisecond {
				t.Errorf("probe timeout %v, want the one given to Open", timeout)
			}
			probes++
			return probes == 3 // the third probe finds a quorum
		},
		Changed: func(_ context.Context, from, to State) {
			mu.Lock()
			seen = append(seen, from.String()+">"+to.String())
			mu.Unlock()
		},
	})
	want := "[open>half_open half_open>open open>half_open half_open>open open>half_open half_open>closed]"
	if got := fmtList(seen); got != want {
		t.Errorf("changes %v, want %v", got, want)
	}
	if b.State() != Closed || b.Closings() != 1 {
		t.Errorf("after the probes: %v, %d closings", b.State(), b.Closings())
	}
	select {
	case <-changed:
	default:
		t.Error("a waiter of a change was not woken")
	}
}

func TestStop(t *testing.T) {
	var b Breaker
	stop, _ := b.Open(time.Now(), time.Hour, time.Second)
	_, changed := b.Changed()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.ProbeLoop(stop, Prober{Cooldown: time.Hour, Now: time.Now,
			Probe: func(time.Duration) bool { return true }, Changed: func(context.Context, State, State) {}})
	}()
	b.Stop()
	<-done
	<-changed // woken by Stop
	b.Stop()  // twice is fine
	if st := b.State(); st != Open {
		t.Errorf("state %v after Stop, want it left open", st)
	}
	var c Breaker
	c.Stop()
	if _, ok := c.Open(time.Now(), time.Second, time.Second); ok {
		t.Error("a stopped breaker opened")
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}
