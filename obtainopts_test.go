package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Tests of the obtain options' checks (obtainopts.go).

func TestAutoRefreshOptionsValidated(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	for _, opt := range []ObtainOption{WithRefreshInterval(time.Second), WithRefreshInterval(-1), WithMaxHold(-1)} {
		if _, err := c.TryObtain(context.Background(), "opts", time.Second, WithAutoRefresh(), opt); !errors.Is(err, ErrInvalid) {
			t.Errorf("TryObtain with a bad keep-alive option: %v, want ErrInvalid", err)
		}
	}
}
