package redlock

import (
	"testing"
	"time"
)

func TestDriftAllowance(t *testing.T) {
	if got := DriftAllowance(10*time.Second, DefaultDriftFactor); got != 102*time.Millisecond {
		t.Errorf("DriftAllowance(10s, 1%%) = %v, want 102ms", got)
	}
	c := config{drift: 0.05}
	if got, want := c.validity(time.Second), time.Second-DriftAllowance(time.Second, 0.05); got != want {
		t.Errorf("validity = %v, want the TTL less DriftAllowance: %v", got, want)
	}
}
