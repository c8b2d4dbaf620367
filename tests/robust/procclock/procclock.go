// Package procclock makes the clocks of the process it runs in jump while
// it runs: CLOCK_REALTIME and CLOCK_MONOTONIC as the Go runtime reads them,
// for every goroutine (time.Now, timers, sleeps, deadlines), forward or
// back, by any amount.
//
// faketime's LD_PRELOAD cannot do this for a Go binary: the runtime reads
// both clocks through the vDSO's clock_gettime directly, never through
// libc. This package does what faketime does one level down: Install
// points the runtime's vDSO entry (runtime.vdsoClockgettimeSym, which the
// runtime exports for such uses) at an assembly function that calls the
// real vDSO and adds the offsets Jump has set. The kernel's clocks, and
// every other process's, do not move; RealNow and MonoNow read them with
// the system call, past the offsets.
//
// linux/amd64 only; elsewhere Install fails and says so.
package procclock

import "time"

// Clock is a clock that Jump moves.
type Clock int

const (
	Realtime  Clock = iota // CLOCK_REALTIME: time.Now's wall reading
	Monotonic              // CLOCK_MONOTONIC: time.Now's monotonic reading, timers, sleeps
)

func (c Clock) String() string {
	if c == Monotonic {
		return "monotonic"
	}
	return "realtime"
}

// Offset is how far c has jumped in all, as this process's runtime reads
// it: the runtime's reading less the kernel's.
func Offset(c Clock) time.Duration { return offset(c) }
