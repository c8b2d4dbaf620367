package script

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/driver"
)

// The check of a sequencer (checkseq.lua, Client.Check).

//go:embed checkseq.lua
var checkSeqSrc string

var checkSeq = newScript(epochSrc + "\n" + counterSrc + "\n" + checkSeqSrc)

// Standing is what a node says of a sequencer.
type Standing int

const (
	// NotCurrent: the lock is not held on the node in the sequencer's
	// kind, or its latest token there is another (Seen.Why says which).
	NotCurrent Standing = 0
	// Current: the lock is held on the node in the sequencer's kind, and
	// its latest token there is the sequencer's.
	Current Standing = 1
	// SeenRecovering: the node may not vote yet (the restart guard), for
	// Seen.Left more; it vouches for nothing.
	SeenRecovering Standing = 2
	// Forgotten: the lock is held on the node, which no longer knows its
	// token (the counter missing or below the epoch's floor); it vouches
	// for nothing.
	Forgotten Standing = 3
)

// Why a node says NotCurrent.
const (
	WhyNotHeld     = 0 // no key, or no live hold
	WhyOtherKind   = 1 // held in another kind
	WhyOtherToken  = 2 // the latest token is another
	maxWhy         = WhyOtherToken
	maxStanding    = Forgotten
	checkSeqReplyN = 2
)

// Seen is the decoded reply of checkseq.lua.
type Seen struct {
	Standing Standing
	Why      int           // NotCurrent's reason
	Left     time.Duration // SeenRecovering's time left
}

// CheckSeqCall prepares checkseq.lua on a lock's keys k (its key, fencing
// counter and the node's epoch record), for a sequencer of kind mode ('p'
// a plain lock, else a hold's mode: 'w', 'r' or 's') and token, after the
// restart guard g.
func CheckSeqCall(k Keys, mode byte, token int64, g Guard) Call {
	argv := append([]any{string(mode), strconv.FormatInt(token, 10)}, g.args()...)
	return checkSeq.call([]string{k.Lock, k.Fence, k.Epoch}, argv...)
}

// CheckSeq runs a prepared check on one node. A node that holds the lock
// in another kind answers NotCurrent, not an error.
func (call Call) CheckSeq(ctx context.Context, n driver.Node) (Seen, error) {
	v, err := call.Run(ctx, n)
	if err != nil {
		return Seen{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != checkSeqReplyN {
		return Seen{}, fmt.Errorf("redlock: unexpected check reply %v", v)
	}
	st, ok1 := a[0].(int64)
	d, ok2 := a[1].(int64)
	if !ok1 || !ok2 || st < 0 || st > int64(maxStanding) || st == int64(NotCurrent) && (d < 0 || d > maxWhy) {
		return Seen{}, fmt.Errorf("redlock: unexpected check reply %v", v)
	}
	s := Seen{Standing: Standing(st)}
	switch s.Standing {
	case NotCurrent:
		s.Why = int(d)
	case SeenRecovering:
		s.Left = time.Duration(d) * time.Millisecond
	}
	return s, nil
}
