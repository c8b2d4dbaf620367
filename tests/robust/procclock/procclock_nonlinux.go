//go:build !linux

package procclock

import "time"

// RealNow is time.Now: Install fails here, nothing offsets it.
func RealNow() time.Time { return time.Now() }

// MonoNow is not available here.
func MonoNow() int64 { return 0 }
