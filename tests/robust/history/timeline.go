package history

import (
	"fmt"
	"io"
	"slices"
)

// Timeline prints events in time order, one a line, with times in
// milliseconds from the first event: a reading of the history for a person.
func Timeline(w io.Writer, events []Event) {
	events = slices.Clone(events)
	slices.SortStableFunc(events, cmpTime)
	var t0 int64
	for _, e := range events {
		if t := at(e); e.Type != TypeRun && t > 0 {
			t0 = t
			break
		}
	}
	ms := func(t int64) string {
		if t == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", float64(t-t0)/1e6)
	}
	for _, e := range events {
		switch e.Type {
		case TypeRun:
			fmt.Fprintf(w, "run %s seed %d %s\n", e.Scenario, e.Seed, e.Config)
		case TypeAttempt:
			fmt.Fprintf(w, "%10s %-4s obtain called, returned at %s: ok=%v %s\n", ms(e.Inv), e.Client, ms(e.Resp), e.OK, e.Err)
		case TypeHold:
			fmt.Fprintf(w, "%10s %-4s holds %s token %d until %s lost=%v\n", ms(e.Obtained), e.Client, e.Kind, e.Token, ms(e.End), e.Lost)
		case TypeStore:
			fmt.Fprintf(w, "%10s %-4s store %s token %d (lock %d) value %d prev %d → %s at %s\n", ms(e.Inv), e.Client, e.Op, e.StoreToken, e.LockToken, e.Value, e.Prev, e.Result, ms(e.Resp))
		case TypeFault:
			fmt.Fprintf(w, "%10s %-4s fault %s on %s until %s %s", ms(e.Start), e.Client, e.Fault, e.Target, ms(e.Stop), e.Text)
			if e.Count > 0 {
				fmt.Fprintf(w, " (fired %d times)", e.Count)
			}
			fmt.Fprintln(w)
		case TypeFinal:
			fmt.Fprintf(w, "           final counter %d, store accepted %d, rejected %d\n", e.Final, e.Accepted, e.Rejected)
		case TypeNote:
			fmt.Fprintf(w, "%10s      %s\n", ms(e.Inv), e.Text)
		}
	}
}
