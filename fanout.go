package redlock

import "sync"

// fanOutLimit bounds the goroutines of one fan-out: Close with a frozen
// node then takes a few node timeouts, not one per lock, without a
// goroutine per lock.
const fanOutLimit = 64

// fanOut runs f(i) for every i in [0, n) on goroutines of its own, at most
// fanOutLimit at a time, and returns when every call has: the bounded
// parallel fan-out of a lock of several names (eachPart) and of Close
// (releaseAll).
func fanOut(n int, f func(i int)) {
	sem := make(chan struct{}, fanOutLimit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
