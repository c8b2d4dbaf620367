package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// An obtain refused by the Client's open circuit breaker exits 69 (fewer
// than a quorum of nodes reachable), even when --wait ran out meanwhile.
func TestObtainFailureBreakerOpen(t *testing.T) {
	be := fmt.Errorf("%w: 1 of 2 needed nodes reachable", redlock.ErrBreakerOpen)
	for _, err := range []error{be, errors.Join(be, context.DeadlineExceeded)} {
		if code, _, _ := obtainFailure(err, time.Second); code != exitUnavailable {
			t.Errorf("obtainFailure(%v) = %d, want %d", err, code, exitUnavailable)
		}
	}
}
