package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is a checked history: one row of docs/fault-testing.md's tables.
type Result struct {
	Scenario string
	Seed     int64

	Attempts, Obtained int // Obtain calls, and those that obtained
	Holds              int // holds recorded (Obtained less those cut short by the run's end)
	Faults             int

	// The store's own counts: writes accepted, operations (reads and
	// writes) refused as stale; and the final counter.
	Accepted, Rejected int64
	Final              int64
	Lost               int64 // Accepted - Final: two accepted writes of one value

	Overlaps      int // pairs of holds at once (not both reads)
	Inversions    int // pairs of conflicting holds in the wrong token order
	StaleAccepted int // accepted writes below an earlier accepted write's lock token

	Linearizable porcupine.CheckResult // porcupine's verdict on the store operations

	P50, P99 time.Duration // latency of the successful Obtain calls
}

// Violations reports whether the result shows any violation of mutual
// exclusion or of the resource's safety.
func (r Result) Violations() bool {
	return r.Overlaps > 0 || r.Inversions > 0 || r.StaleAccepted > 0 || r.Lost > 0 || r.Linearizable == porcupine.Illegal
}

// Header is the table header of Row.
const Header = "| scenario | seed | attempts (obtained) | faults | accepted | rejected | overlaps | inversions | stale accepted | lost | linearizable | p50 | p99 |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// Row is the result as a markdown table row.
func (r Result) Row() string {
	return fmt.Sprintf("| %s | %d | %d (%d) | %d | %d | %d | %d | %d | %d | %d | %s | %v | %v |",
		r.Scenario, r.Seed, r.Attempts, r.Obtained, r.Faults, r.Accepted, r.Rejected, r.Overlaps, r.Inversions,
		r.StaleAccepted, r.Lost, r.Linearizable, r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
}

// Check checks a history: the interval and counter checks, and porcupine
// within timeout (0: none), writing its visualization to html on a
// violation when html is not empty.
func Check(events []Event, timeout time.Duration, html string) (Result, error) {
	var r Result
	var holds, writes []Event
	var lat []time.Duration
	for _, e := range events {
		switch e.Type {
		case TypeRun:
			r.Scenario, r.Seed = e.Scenario, e.Seed
		case TypeAttempt:
			r.Attempts++
			if e.OK {
				r.Obtained++
				lat = append(lat, time.Duration(e.Resp-e.Inv))
			}
		case TypeHold:
			holds = append(holds, e)
		case TypeFault:
			r.Faults++
		case TypeStore:
			if e.Op == OpWrite && e.Result == OK {
				writes = append(writes, e)
			}
		case TypeFinal:
			r.Final, r.Accepted, r.Rejected = e.Final, e.Accepted, e.Rejected
			r.Lost = e.Accepted - e.Final
		}
	}
	r.Holds = len(holds)
	r.Overlaps, r.Inversions = Conflicts(holds)
	r.StaleAccepted = StaleAccepted(writes)
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50 = lat[len(lat)*50/100]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	var err error
	r.Linearizable, err = Linearizable(events, timeout, html)
	return r, err
}

// Conflicts counts the pairs of holds whose [Obtained, End) intervals
// intersect, unless both are reads (readers share the lock), and the pairs
// of conflicting holds (not both reads) where the one that ended before the
// other was obtained has the higher or equal token (docs/lock-family.md:
// a write above every earlier hold, a read above every earlier write).
// Two holds of one reentrant owner with the same token are one hold on
// the nodes (the owner obtained again while the nodes still counted its
// earlier hold, whose release had not reached them), not an inversion.
func Conflicts(holds []Event) (overlaps, inversions int) {
	holds = slices.Clone(holds)
	slices.SortFunc(holds, func(a, b Event) int { return cmp64(a.Obtained, b.Obtained) })
	read := func(e Event) bool { return e.Kind == "read" }
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if read(a) && read(b) {
				continue
			}
			if b.Obtained < a.End {
				overlaps++
			}
			sameHold := a.Kind == "reentrant" && a.Client == b.Client && a.Token == b.Token
			if a.End < b.Obtained && a.Token >= b.Token && !sameHold {
				inversions++
			}
		}
	}
	return overlaps, inversions
}

// StaleAccepted counts the accepted writes whose lock token is below that
// of a write accepted before they started.
func StaleAccepted(writes []Event) int {
	n := 0
	for _, w := range writes {
		for _, x := range writes {
			if x.Resp < w.Inv && x.LockToken > w.LockToken {
				n++
				break
			}
		}
	}
	return n
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
