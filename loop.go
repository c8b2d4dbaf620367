package redlock

import (
	"context"
	"sync"
	"time"
)

// loop is one of the Client's background goroutines that work on a
// ticker (the configuration recorder, the adaptive TTL's sampler): started
// at most once, never after stop, and stop cancels it and waits for it.
type loop struct {
	mu       sync.Mutex
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	finished chan struct{}
}

// start starts the goroutine on wg, unless the loop has started or
// stopped: it calls tick every interval (first at once if now is set,
// else after one interval) until stop. The context tick gets is cancelled
// by stop.
func (l *loop) start(wg *sync.WaitGroup, every time.Duration, now bool, tick func(context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.finished = cancel, make(chan struct{})
	wg.Go(func() {
		defer close(l.finished)
		t := time.NewTicker(every)
		defer t.Stop()
		if now {
			tick(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			tick(ctx)
		}
	})
}

// begun reports whether the loop has started or stopped: start would do
// nothing.
func (l *loop) begun() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started || l.stopped
}

// stop stops the goroutine and waits for it; none starts after it.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopped = true
	started := l.started
	l.mu.Unlock()
	if started {
		l.cancel()
		<-l.finished
	}
}
