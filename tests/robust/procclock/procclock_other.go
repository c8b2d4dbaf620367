//go:build !(linux && amd64)

package procclock

import (
	"errors"
	"time"
)

// Install fails: moving the process's clocks needs linux/amd64.
func Install() error {
	return errors.New("procclock: moving the process's clocks needs linux/amd64")
}

// Jump does nothing: Install failed.
func Jump(Clock, time.Duration) {}

func offset(Clock) time.Duration { return 0 }
