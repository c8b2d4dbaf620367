package redlock

import "time"

// request is one obtain: what a handle asks for, and the state of the call.
type request struct {
	// names are the candidates: one name, or Client.Any's names; keys are
	// their Redis keys. one holds a single name and its key, for names and
	// keys to point at without a slice of their own.
	one, oneKey [1]string
	names       []string
	keys        []string
	*spec                     // the kind asked for: a handle's, or a package spec
	ttl         time.Duration // the TTL asked for, checked
	o           obtainConfig
	id          uint64 // ObtainID, when observed
	// writerMark is the value of an exclusive obtain's writer mark, one
	// per call.
	writerMark string
	// attempts are the acquire attempts made (ObtainEvent.Attempts);
	// passes the passes over the candidates (one attempt each for a single
	// name), which WithMaxAttempts counts, those the breaker refused
	// included.
	attempts, passes int
	// The TTL of the last attempt, and why (ObtainEvent).
	lastTTL time.Duration
	why     string
	// The storage of the waiter's candidates (waiter.order, heldUntil)
	// for a few names, so that they need no allocation of their own.
	orderBuf [4]int
	heldBuf  [1]time.Time
}
