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
	j.add(1, record{at: at(1), attempt: &redlock.AttemptEvent{}})
	j.add(2, record{at: at(5), wait: &redlock.WaitEvent{}})
	j.add(1, record{at: at(6), wait: &redlock.WaitEvent{}})
	// Concurrent obtains (of one name or not) keep their records apart.
	if got := j.take(1); len(got) != 2 || got[0].attempt == nil || got[1].wait == nil {
		t.Errorf("take(1) = %v, want its attempt and its wait", got)
	}
	if got := j.take(2); len(got) != 1 || got[0].wait == nil {
		t.Errorf("take(2) = %v, want the wait", got)
	}
	if len(j.obtains) != 0 {
		t.Errorf("journal keeps %v, want nothing", j.obtains)
	}
	for i := range maxRecords + 10 {
		j.add(3, record{at: at(i)})
	}
	if got := j.take(3); len(got) != maxRecords || !got[0].at.Equal(at(10)) {
		t.Errorf("took %d records from %v, want the %d newest", len(got), got[0].at, maxRecords)
	}
	for i := range maxObtains + 1 {
		j.add(uint64(100+i), record{at: at(i)})
	}
	if len(j.obtains) != maxObtains {
		t.Errorf("%d obtains in progress kept, want at most %d", len(j.obtains), maxObtains)
	}
}
