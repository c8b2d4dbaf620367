package redlock

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// One Client with a larger max TTL lengthens every node's recovery for the
// others (WithMaxTTL says so); their error names the real source of the
// window, the max TTL in the node's epoch record, not their own WithMaxTTL.
func TestMaxTTLOfAnotherClientIsNamedInTheRecoveringError(t *testing.T) {
	cl := startNodes(t, 1)
	ctx := context.Background()
	big := newClient(t, cl.clients, WithRestartGuard(GuardOn), WithMaxTTL(time.Hour))
	if _, err := big.TryObtain(ctx, "x", time.Second); !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain on a node started just now: %v, want ErrNodeRecovering", err)
	}
	small := newClient(t, cl.clients, WithRestartGuard(GuardOn), WithMaxTTL(2*time.Second))
	_, err := small.TryObtain(ctx, "x", time.Second)
	if !errors.Is(err, ErrNodeRecovering) {
		t.Fatalf("TryObtain of the Client with the smaller max TTL: %v, want ErrNodeRecovering", err)
	}
	if !regexp.MustCompile(`max TTL of at least (59m5\ds|1h0m0s)`).MatchString(err.Error()) {
		t.Errorf("error %q does not give the recorded max TTL of about 1h", err)
	}
	for _, want := range []string{"epoch record", "larger WithMaxTTL than this Client's 2s", "redlock doctor", "A recovery window longer than the max TTL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
