package quorum

import (
	"sync"
	"time"
)

// Spawner starts a function on a goroutine that its owner waits for:
// a *sync.WaitGroup, or Workers.
type Spawner interface {
	Go(f func())
}

// Workers starts functions on goroutines that it keeps for a while once
// they are done, for the next function to reuse. A node's request runs on
// a deep call stack (go-redis's pool, hooks and reader): a new goroutine
// grows its stack, by copying, on every request, and a profile of a
// 5-node cycle showed that copying at about a tenth of the client's CPU.
// A kept goroutine has its stack grown already.
//
// Every goroutine is counted in the WaitGroup given to NewWorkers, whose
// owner waits for it after Stop. A goroutine that stays idle for the idle
// time given to NewWorkers ends.
type Workers struct {
	wg   *sync.WaitGroup
	idle time.Duration
	work chan func()
	quit chan struct{}
	stop sync.Once
}

// NewWorkers returns Workers whose goroutines wg counts.
func NewWorkers(wg *sync.WaitGroup, idle time.Duration) *Workers {
	return &Workers{wg: wg, idle: idle, work: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on an idle goroutine, or on a new one when none is idle.
func (w *Workers) Go(f func()) {
	select {
	case w.work <- f:
		return
	default:
	}
	w.wg.Add(1)
	go w.run(f)
}

func (w *Workers) run(f func()) {
	defer w.wg.Done()
	idle := time.NewTimer(w.idle)
	defer idle.Stop()
	for {
		f()
		f = nil
		idle.Reset(w.idle)
		select {
		case f = <-w.work:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// Stop ends the idle goroutines, and each busy one once its function
// returns. Go still works after Stop: its goroutine ends with its function.
func (w *Workers) Stop() { w.stop.Do(func() { close(w.quit) }) }
