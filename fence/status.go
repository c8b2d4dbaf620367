package fence

import (
	"context"
	"strconv"
)

// Status is what the lock's nodes say of a sequencer (redlock's
// Client.Check): whether its holder is still the lock's latest holder.
// The zero Status is Unknown.
type Status int

const (
	// Unknown: no quorum of the lock's nodes could say (down, partitioned,
	// recovering from a restart, or no longer knowing the lock's token),
	// so the sequencer can be judged neither current nor superseded.
	Unknown Status = iota
	// Current: the lock is held on a quorum of its nodes in the
	// sequencer's kind, and its latest token there is the sequencer's: no
	// later token was issued. It was so while the check ran; it may have
	// changed since.
	Current
	// Superseded: enough nodes say the lock is no longer held, or that a
	// later token was issued, that no quorum can say Current.
	Superseded
)

// String returns "unknown", "current" or "superseded".
func (s Status) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Current:
		return "current"
	case Superseded:
		return "superseded"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Checker asks a lock's nodes whether a sequencer is current: redlock's
// *Client is one (Client.Check). A Guard given one (Checked) admits only
// current sequencers.
type Checker interface {
	Check(ctx context.Context, s Sequencer) (Status, error)
}
