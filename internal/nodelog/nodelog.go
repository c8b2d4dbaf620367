// Package nodelog rate-limits a Client's log lines about its nodes: one
// line per node and kind of condition a minute, so that a node that stays
// down does not flood the log.
package nodelog

import (
	"sync"
	"time"
)

// Kind is a kind of log line.
type Kind int

// The kinds of lines.
const (
	Skipped    Kind = iota // a node skipped after repeated timeouts
	Recovering             // a node recovering after a restart or failover
	Degraded               // a lock obtained in degraded mode (node -1)
	Memory                 // a node under memory pressure
	RTTAtMax               // the adaptive TTL capped at Max (node -1)
	SampleErr              // the sampler cannot read a node
)

// Every is the least time between two lines of one node and kind.
const Every = time.Minute

// Limiter says when a line is due. The zero value is ready to use.
type Limiter struct {
	mu   sync.Mutex
	last map[key]time.Time
}

type key struct {
	node int
	kind Kind
}

// Due reports whether a line of kind about node (-1: none) may be logged
// at now, and if so records it.
func (l *Limiter) Due(node int, kind Kind, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = make(map[key]time.Time)
	}
	k := key{node, kind}
	if t, ok := l.last[k]; ok && now.Sub(t) < Every {
		return false
	}
	l.last[k] = now
	return true
}
