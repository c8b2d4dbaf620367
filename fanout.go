package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

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

// eachPart runs f on every part of a lock of several names, a bounded
// number at a time (fanOut), and joins the errors, each prefixed with its
// part's name.
func eachPart(parts []*Lock, f func(*Lock) error) error {
	errs := fanOut(parts, f)
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("lock %q: %w", parts[i].Name(), err)
		}
	}
	return errors.Join(errs...)
}

// releaseAll releases locks in parallel, a bounded number at a time, so that
// Close with a frozen node takes a few node timeouts, not one per lock.
func releaseAll[L releaser](locks []L) {
	fanOut(locks, func(l L) error { return l.Release(context.Background()) })
}
