//go:build linux && amd64

package procclock

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname
)

// vdsoClockgettimeSym is the address of the vDSO's clock_gettime, through
// which the runtime reads both clocks (runtime/time_linux_amd64.s,
// runtime/sys_linux_amd64.s); the runtime exports it for linkname.
//
//go:linkname vdsoClockgettimeSym runtime.vdsoClockgettimeSym
var vdsoClockgettimeSym uintptr

// Read by clockGettime (procclock_linux_amd64.s).
var (
	//lint:ignore U1000 read by procclock_linux_amd64.s
	realClockGettime uintptr // the vDSO's own clock_gettime
	offsetRealtime   int64   // nanoseconds added to CLOCK_REALTIME
	offsetMonotonic  int64   // nanoseconds added to CLOCK_MONOTONIC
)

// clockGettime is the vDSO's clock_gettime with the offsets added; it
// follows the C calling convention, as the runtime calls it (its address
// is taken in assembly, by clockGettimeAddr).
//
//lint:ignore U1000 called by the runtime, through vdsoClockgettimeSym
func clockGettime()

// clockGettimeAddr is clockGettime's address (its assembly entry).
func clockGettimeAddr() uintptr

var installOnce sync.Once
var installErr error

// Install makes the runtime read its clocks through the offsets. It is
// done once per process and cannot be undone (Jump back to zero instead).
func Install() error {
	installOnce.Do(func() {
		sym := atomic.LoadUintptr(&vdsoClockgettimeSym)
		if sym == 0 {
			installErr = errors.New("procclock: the runtime found no vDSO clock_gettime; the process's clocks cannot be moved")
			return
		}
		realClockGettime = sym
		atomic.StoreUintptr(&vdsoClockgettimeSym, clockGettimeAddr())
	})
	return installErr
}

// Jump moves c by d (back when d < 0), at once, for every reading the
// runtime makes from now on. Install must have succeeded.
func Jump(c Clock, d time.Duration) {
	if c == Monotonic {
		atomic.AddInt64(&offsetMonotonic, int64(d))
		return
	}
	atomic.AddInt64(&offsetRealtime, int64(d))
}

func offset(c Clock) time.Duration {
	if c == Monotonic {
		return time.Duration(atomic.LoadInt64(&offsetMonotonic))
	}
	return time.Duration(atomic.LoadInt64(&offsetRealtime))
}
