package redlockotel

import (
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// The classification of outcomes is shared with redlockprom
// (internal/hookstate), so that both adapters speak of the same things.

// A record is an attempt or a wait kept for the span of its obtain, which
// the Hook sees only when the obtain has ended.
type record struct {
	at      time.Time // when the Hook saw it
	attempt *redlock.AttemptEvent
	wait    *redlock.WaitEvent
}

// Bounds of a journal: records only outlive their obtain when obtains of
// one name overlap, but nothing else bounds them.
const (
	maxRecords = 64   // per lock name; the oldest go first
	maxNames   = 4096 // beyond, the obtains of new names show no attempts
)

// journal keeps the attempts and waits of obtains in progress, by lock
// name.
type journal struct {
	mu    sync.Mutex
	names map[string][]record
}

func (j *journal) add(name string, r record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.names == nil {
		j.names = make(map[string][]record)
	}
	rs, ok := j.names[name]
	if !ok && len(j.names) >= maxNames {
		return
	}
	if len(rs) >= maxRecords {
		rs = append(rs[:0], rs[1:]...)
	}
	j.names[name] = append(rs, r)
}

// take removes and returns the records of name seen since since.
func (j *journal) take(name string, since time.Time) []record {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.names[name]
	var taken, kept []record
	for _, r := range rs {
		if r.at.Before(since) {
			kept = append(kept, r)
		} else {
			taken = append(taken, r)
		}
	}
	if len(kept) == 0 {
		delete(j.names, name)
	} else {
		j.names[name] = kept
	}
	return taken
}
