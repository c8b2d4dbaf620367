package redlock

import "sync"

// fanOutLimit bounds the goroutines of one fan-out: Close with a frozen
// node then takes a few node timeouts, not one per lock, without a
// goroutine per lock.
const fanOutLimit = 64

// fanOut runs f on every item on goroutines of its own, at most
// fanOutLimit at a time, and returns when every call has, with each call's
// error at its item's index: the bounded parallel fan-out of a lock of
// several names (eachPart) and of Close (releaseAll).
func fanOut[T any](items []T, f func(T) error) []error {
	errs := make([]error, len(items))
	sem := make(chan struct{}, fanOutLimit)
	var wg sync.WaitGroup
	for i, item := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(item)
		})
	}
	wg.Wait()
	return errs
}
