package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// An obtain refused by the Client's open circuit breaker exits 69 (fewer
// than a quorum of nodes reachable), even when --wait ran out meanwhile.
func TestObtainFailureBreakerOpen(t *testing.T) {
	be := &redlock.BreakerError{State: redlock.BreakerOpen, Reachable: 1, Need: 2}
	for _, err := range []error{be, errors.Join(be, context.DeadlineExceeded)} {
		if code, _, _ := obtainFailure(err, time.Second); code != exitUnavailable {
			t.Errorf("obtainFailure(%v) = %d, want %d", err, code, exitUnavailable)
		}
	}
}
