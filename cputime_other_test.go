//go:build !unix

package redlock

import "time"

// cpuTime is 0 where there is no getrusage: the benchmarks' CPU metrics
// are then meaningless.
func cpuTime() time.Duration { return 0 }
