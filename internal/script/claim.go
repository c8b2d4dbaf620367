package script

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/driver"
	layout "github.com/redlock-go/redlock/internal/keys"
)

// The claim of a handed-off lock (resume.lua, Client.Resume).

// ClaimStatus is what a claim of a handed-off lock found on one node.
type ClaimStatus int

const (
	// NotClaimed: the node does not hold the form's secret.
	NotClaimed ClaimStatus = 0
	// Claimed: the secret was the form's and is the new one now.
	Claimed ClaimStatus = 1
	// ClaimRecovering: the node may not vote yet (the restart guard,
	// epoch.lua), for Claim.Left more; it changed nothing.
	ClaimRecovering ClaimStatus = 2
	// AlreadyClaimed: a claim of the form's secret ran on the node before.
	AlreadyClaimed ClaimStatus = 3
	// Superseded: the node holds the secret, but its fencing counter is
	// missing or, raised to the epoch's floor as an acquire reads it,
	// above the form's token: a holder granted after the form's lock can
	// have drawn a token there. Nothing changed.
	Superseded ClaimStatus = 4
)

// Claim is the decoded reply of resume.lua: the status, and how long the
// claimed hold has left on the node when Claimed, or how long the node
// still recovers when ClaimRecovering.
type Claim struct {
	Status ClaimStatus
	Left   time.Duration
}

// ClaimKind is resume.lua's kind argument of a hold: 'p' for a plain
// lock (h nil), else the hold's mode.
func ClaimKind(h *Hold) string {
	if h == nil || h.Mode == 0 {
		return "p"
	}
	return string(h.Mode)
}

// ClaimCall prepares resume.lua on a lock's keys k (its key, fencing
// counter and the node's epoch record): the secret old of a lock of h's
// kind (h nil or of Mode 0: a plain lock) and of fencing token token
// becomes new, where the node is not recovering (g, the restart guard, as
// an acquire's) and the lock's fencing counter, raised to the epoch's
// floor, is at most token; the claim leaves a tombstone of old for
// g.FenceTTL.
func ClaimCall(k Keys, h *Hold, old, new string, token int64, g Guard) Call {
	arg := ""
	switch {
	case h == nil:
	case h.Mode == layout.ModeWrite:
		arg = h.Owner
	case h.Mode == layout.ModePermit:
		arg = strconv.Itoa(h.Permits)
	}
	argv := append([]any{ClaimKind(h), arg, old, new, strconv.FormatInt(token, 10)}, g.args()...)
	return resume.call([]string{k.Lock, k.Fence, k.Epoch}, argv...)
}

// Claim runs a prepared claim on one node. A node that holds the secret
// in another kind answers an error starting with REDLOCK_KIND.
func (call Call) Claim(ctx context.Context, n driver.Node) (Claim, error) {
	v, err := call.Run(ctx, n)
	if err != nil {
		return Claim{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return Claim{}, fmt.Errorf("redlock: unexpected claim reply %v", v)
	}
	status, ok1 := a[0].(int64)
	left, ok2 := a[1].(int64)
	if !ok1 || !ok2 || status < int64(NotClaimed) || status > int64(Superseded) {
		return Claim{}, fmt.Errorf("redlock: unexpected claim reply %v", v)
	}
	return Claim{Status: ClaimStatus(status), Left: time.Duration(left) * time.Millisecond}, nil
}
