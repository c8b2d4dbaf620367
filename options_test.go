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
