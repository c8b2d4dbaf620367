//go:build linux

package procclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// RealNow reads the kernel's CLOCK_REALTIME (a system call: no offset).
func RealNow() time.Time {
	return time.Unix(0, raw(unix.CLOCK_REALTIME))
}

// MonoNow reads the kernel's CLOCK_MONOTONIC (a system call: no offset;
// a time namespace's offset is in it), in nanoseconds.
func MonoNow() int64 { return raw(unix.CLOCK_MONOTONIC) }

func raw(clock int32) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(clock, &ts)
	return ts.Nano()
}
