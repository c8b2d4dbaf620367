package sampler

import (
	"strings"
	"testing"
)

func TestParsePressure(t *testing.T) {
	info := "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:2097152\r\nmaxmemory_policy:volatile-ttl\r\n# Stats\r\nevicted_keys:42\r\n"
	m := Parse(info)
	if m != (Memory{Used: 1 << 20, Max: 2 << 20, Policy: "volatile-ttl", Evicted: 42}) {
		t.Fatalf("Parse: %+v", m)
	}
	if p := Pressure(m, 0.9); !strings.Contains(p, "42 keys evicted") {
		t.Fatalf("evictions: pressure %q", p)
	}
	m.Evicted = 0
	if p := Pressure(m, 0.9); p != "" {
		t.Fatalf("half full: pressure %q", p)
	}
	if !Fuller(Memory{Used: 3, Max: 4}, m) || Fuller(Memory{Used: 3}, m) {
		t.Error("Fuller: a node at 3/4 is fuller than one at 1/2, and one without maxmemory is not")
	}
}

func TestState(t *testing.T) {
	var s State
	s.Init(2)
	if s.Warm(1) || !s.Warm(1) || s.Warm(0) {
		t.Error("Warm: false at the first read of each node, true after")
	}
	for _, c := range []struct{ total, want int64 }{{10, 0}, {15, 5}, {15, 0}, {3, 0}, {4, 1}} {
		if got := s.Evictions(0, c.total); got != c.want {
			t.Errorf("Evictions(total %d) = %d, want %d", c.total, got, c.want)
		}
	}
}
