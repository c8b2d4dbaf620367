package redlockotel

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

func TestJournal(t *testing.T) {
	var j journal
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	j.add("a", record{at: at(1), attempt: &redlock.AttemptEvent{}})
	j.add("a", record{at: at(5), wait: &redlock.WaitEvent{}})
	j.add("b", record{at: at(6), attempt: &redlock.AttemptEvent{}})
	// An obtain of a that began at 3 ms takes what came since, and leaves
	// the records of an obtain of a that began earlier.
	if got := j.take("a", at(3)); len(got) != 1 || got[0].wait == nil {
		t.Errorf("take(a, 3ms) = %v, want the wait", got)
	}
	if got := j.take("a", at(0)); len(got) != 1 || got[0].attempt == nil {
		t.Errorf("take(a, 0) = %v, want the attempt", got)
	}
	if got := j.take("b", at(0)); len(got) != 1 {
		t.Errorf("take(b) = %v", got)
	}
	if len(j.names) != 0 {
		t.Errorf("journal keeps %v, want nothing", j.names)
	}
	for i := range maxRecords + 10 {
		j.add("c", record{at: at(i)})
	}
	if got := j.take("c", at(0)); len(got) != maxRecords || !got[0].at.Equal(at(10)) {
		t.Errorf("took %d records from %v, want the %d newest", len(got), got[0].at, maxRecords)
	}
}
