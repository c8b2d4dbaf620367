package redlock

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/redlock-go/redlock/internal/script"
)

// secret is what makes a lock its holder's on the nodes: the random value
// of a plain lock, or the hold of a lock of the family or of a permit,
// with its random ID. A plain lock, the most held, has no hold: its hold
// is stored beside the Lock of the others (newLock), not in every Lock.
type secret struct {
	id   string          // the value, or the hold's ID
	hold *script.Hold    // nil for a plain lock
	args script.LockArgs // a plain lock's key and value, boxed once
}

// holdOf is the lock's hold: a plain lock's has its value as ID, and
// Mode 0.
func (s *secret) holdOf() script.Hold {
	if s.hold != nil {
		return *s.hold
	}
	return script.Hold{ID: s.id}
}

// newValue returns 128 random bits, hex-encoded: the owner's secret.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}
