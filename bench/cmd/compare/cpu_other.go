//go:build !unix

package main

import "time"

// cpuTime is 0 where there is no getrusage: the report's CPU columns are
// then empty of meaning (the comparison is published from Linux runs).
func cpuTime() time.Duration { return 0 }
