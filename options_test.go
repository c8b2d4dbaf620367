package redlock

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
)

func TestDriftAllowance(t *testing.T) {
	if got := limits.DriftAllowance(10*time.Second, limits.DriftFactor); got != 102*time.Millisecond {
		t.Errorf("limits.DriftAllowance(10s, 1%%) = %v, want 102ms", got)
	}
	c := config{drift: 0.05}
	if got, want := c.validity(time.Second), time.Second-limits.DriftAllowance(time.Second, 0.05); got != want {
		t.Errorf("validity = %v, want the TTL less limits.DriftAllowance: %v", got, want)
	}
}

func TestNodeTimeoutDefault(t *testing.T) {
	cfg := defaultConfig()
	tests := []struct{ ttl, want time.Duration }{
		{10 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second},
		{time.Second, 50 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{20 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := cfg.nodeTimeoutFor(tt.ttl); got != tt.want {
			t.Errorf("nodeTimeoutFor(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}
