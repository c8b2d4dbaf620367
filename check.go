package redlock

import (
	"github.com/redlock-go/redlock/fence"
)

// Sequencer returns the lock's sequencer: its name, kind and fencing token
// together (package fence, docs/fencing.md, "Sequencers"), which a
// resource stores to know which lock it follows, and which Client.Check
// asks the nodes about. Pass it, rather than the bare Token, to package
// fence's Redis, Table and Guard.
//
// The sequencer of a lock of several names (Client.All) is the zero
// Sequencer, which every fence refuses with fence.ErrInvalid: each of its
// Parts has a sequencer of its own. A nil *Lock's is the zero Sequencer
// too.
func (l *Lock) Sequencer() fence.Sequencer {
	if l == nil || l.all != nil || l.sp == nil {
		return fence.Sequencer{}
	}
	return fence.Sequencer{Lock: l.lockName(), Kind: string(l.sp.label), Token: l.token}
}
