package redlock

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestLoopStartsOnceAndNeverAfterStop(t *testing.T) {
	var wg sync.WaitGroup
	var l loop
	if l.begun() {
		t.Fatal("a new loop reports begun")
	}
	ticks := make(chan int, 10)
	l.start(&wg, time.Hour, true, func(context.Context) { ticks <- 1 })
	l.start(&wg, time.Hour, true, func(context.Context) { ticks <- 2 })
	if !l.begun() {
		t.Fatal("a started loop does not report begun")
	}
	if got := <-ticks; got != 1 {
		t.Fatalf("the first tick came from start call %d, want 1", got)
	}
	l.stop()
	wg.Wait()
	if len(ticks) != 0 {
		t.Fatalf("the second start ran its tick too (%d more ticks)", len(ticks))
	}

	var never loop
	never.stop()
	if !never.begun() {
		t.Fatal("a stopped loop does not report begun: recorder.check would form its closure on every obtain")
	}
	never.start(&wg, time.Millisecond, true, func(context.Context) { t.Error("a loop ticked after stop") })
	wg.Wait()
}
