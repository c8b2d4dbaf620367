package redlockotel

import (
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// The classification of outcomes is the core's (the events' Result,
// NodeResult.Reason, …), shared with redlockprom, so that both adapters
// speak of the same things.

// A record is an attempt or a wait kept for the span of its obtain, which
// the Hook sees only when the obtain has ended.
type record struct {
	at      time.Time // when the Hook saw it
	attempt *redlock.AttemptEvent
	wait    *redlock.WaitEvent
}

// maxObtains bounds a journal: an obtain's records are taken when it ends,
// so only obtains in progress have records, each at most maxRecords (the
// oldest go first); beyond maxObtains obtains in progress, new ones' spans
// show no attempts.
const (
	maxRecords = 64
	maxObtains = 4096
)

// journal keeps the attempts and waits of obtains in progress, by
// ObtainID.
type journal struct {
	mu      sync.Mutex
	obtains map[uint64][]record
}

func (j *journal) add(id uint64, r record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.obtains == nil {
		j.obtains = make(map[uint64][]record)
	}
	rs, ok := j.obtains[id]
	if !ok && len(j.obtains) >= maxObtains {
		return
	}
	if len(rs) >= maxRecords {
		rs = append(rs[:0], rs[1:]...)
	}
	j.obtains[id] = append(rs, r)
}

// take removes and returns the records of obtain id.
func (j *journal) take(id uint64) []record {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.obtains[id]
	delete(j.obtains, id)
	return rs
}
