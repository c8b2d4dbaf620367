// Package sampler keeps the state and the arithmetic of the adaptive TTL's
// sampler (WithAdaptiveTTL): each node's memory as INFO reports it, the
// evictions since the last sample, whether the sampler has read a node
// yet, and what is wrong with a node's memory. The Client does the I/O
// and reports the samples.
package sampler

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Memory is a node's memory as INFO memory and stats report it.
type Memory struct {
	Used, Max int64  // used_memory, maxmemory (0: no limit)
	Policy    string // maxmemory_policy
	Evicted   int64  // evicted_keys: a total, or a difference (State.Evictions)
}

// Parse reads used_memory, maxmemory, maxmemory_policy and evicted_keys
// from INFO's text.
func Parse(info string) Memory {
	var m Memory
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			m.Used, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			m.Max, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			m.Policy = v
		case "evicted_keys":
			m.Evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

// Fuller reports whether x is closer to its maxmemory than y.
func Fuller(x, y Memory) bool {
	ratio := func(m Memory) float64 {
		if m.Max <= 0 {
			return 0
		}
		return float64(m.Used) / float64(m.Max)
	}
	return ratio(x) > ratio(y)
}

// Pressure says what is wrong with a node's memory, m with Evicted the
// evictions since the last sample, or "" when nothing is: keys evicted,
// or used_memory at least ratio × maxmemory.
func Pressure(m Memory, ratio float64) string {
	var why []string
	if m.Evicted > 0 {
		why = append(why, fmt.Sprintf("%d keys evicted since the last sample (maxmemory-policy %s): a lock key may be among them", m.Evicted, m.Policy))
	}
	if m.Max > 0 && float64(m.Used) >= ratio*float64(m.Max) {
		effect := "keys will be evicted"
		if m.Policy == "noeviction" {
			effect = "writes, acquires included, will be refused"
		}
		why = append(why, fmt.Sprintf("used_memory %d is %.0f%% of maxmemory %d (maxmemory-policy %s): %s",
			m.Used, 100*float64(m.Used)/float64(m.Max), m.Max, m.Policy, effect))
	}
	return strings.Join(why, "; ")
}

// State is the sampler's memory of each node between samples.
type State struct {
	mu sync.Mutex // guards the fields below
	// evicted is each node's evicted_keys at the last sample (-1: none
	// yet); warm is set once the sampler has read the node, whose first
	// read, with its dial, is no round trip.
	evicted []int64
	warm    []bool
}

// Init readies s for n nodes.
func (s *State) Init(n int) {
	s.evicted = make([]int64, n)
	s.warm = make([]bool, n)
	for i := range s.evicted {
		s.evicted[i] = -1
	}
}

// Evictions records node i's total of evicted keys and returns the
// evictions since the last sample: 0 at the first sample, or when the
// total fell (a restarted node).
func (s *State) Evictions(i int, total int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := int64(0)
	if prev := s.evicted[i]; prev >= 0 && total >= prev {
		d = total - prev
	}
	s.evicted[i] = total
	return d
}

// Warm marks node i read, and reports whether it had been read before:
// only then is a read's time a round trip.
func (s *State) Warm(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.warm[i]
	s.warm[i] = true
	return was
}
