package script

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/reply"
)

// The refresh of a lock: one item, or a batch of items in one pipeline
// (refresh.lua, familyrefresh.lua, permitrefresh.lua).

// RefreshResult is what the refresh script did on one node.
type RefreshResult int

const (
	// NotOwner: another owner holds the key; nothing was changed.
	NotOwner RefreshResult = 0
	// Extended: the key held our value; its expiry is at least the TTL.
	Extended RefreshResult = 1
	// Reseeded: the key was missing and was set again with our value.
	Reseeded RefreshResult = 2
	// NotReseeded: the key was missing, and the node is recovering.
	NotReseeded RefreshResult = 3
	// Retired: the key was missing, and the node's fencing counter is
	// above the lock's token: the lock's release retired the token there
	// (Retire), or the node voted for a later lock since. Not re-seeded.
	Retired RefreshResult = 4
)

// Agrees reports whether the node votes for the refresh.
func (r RefreshResult) Agrees() bool { return r == Extended || r == Reseeded }

// Refresh runs the refresh script on one node for the lock of value and
// fencing token token.
func Refresh(ctx context.Context, n driver.Node, k Keys, value string, token int64, ttl time.Duration, g Guard) (RefreshResult, error) {
	return RefreshItem{Keys: k, Value: value, Token: token, TTL: ttl}.Run(ctx, n, g)
}

// Run refreshes the item on one node.
func (it RefreshItem) Run(ctx context.Context, node driver.Node, g Guard) (RefreshResult, error) {
	call := it.call(g.args())
	n, err := reply.Int64(call.Run(ctx, node))
	if err != nil {
		return NotOwner, err
	}
	if n < 0 || n > 4 {
		return NotOwner, fmt.Errorf("redlock: unexpected refresh reply %d", n)
	}
	return RefreshResult(n), nil
}

// RefreshItem is one lock in a batched refresh. A plain lock's item is a
// literal (Keys, Value, Token, TTL); a hold's is made by FamilyRefresh or
// PermitRefresh, which pick its script.
type RefreshItem struct {
	// Keys are the lock's, its fencing counter (Fence) included: a re-seed
	// is refused where the counter is above Token (Retired).
	Keys  Keys
	Value string
	// Token is the lock's fencing token.
	Token int64
	TTL   time.Duration
	// Boxed, when set, are Keys.Lock and Value boxed once by the lock
	// (NewLockArgs of the same key and value), so that a batch boxes
	// neither again.
	Boxed LockArgs
	// hold is set for a lock of the family or a permit (FamilyRefresh,
	// PermitRefresh: unexported, so that a literal cannot give a hold
	// without its script); Value is then unused.
	hold *Hold
	// script makes the item's call with the guard's arguments ga: nil for
	// a plain lock (refresh.lua).
	script func(it RefreshItem, ga []any) Call
}

// FamilyRefresh is the refresh item of a hold of the lock family
// (familyrefresh.lua), of fencing token token.
func FamilyRefresh(k Keys, h *Hold, token int64, ttl time.Duration) RefreshItem {
	return RefreshItem{Keys: k, Token: token, TTL: ttl, hold: h, script: familyRefreshCall}
}

// PermitRefresh is the refresh item of a semaphore's permit
// (permitrefresh.lua), of fencing token token.
func PermitRefresh(k Keys, h *Hold, token int64, ttl time.Duration) RefreshItem {
	return RefreshItem{Keys: k, Token: token, TTL: ttl, hold: h, script: permitRefreshCall}
}

func familyRefreshCall(it RefreshItem, ga []any) Call {
	h := it.hold
	args := append([]any{h.mode(), h.Owner, h.ID, ms(it.TTL)}, ga...)
	return familyRefresh.call([]string{it.Keys.Lock, it.Keys.Epoch, it.Keys.Fence}, append(args, it.Token)...)
}

func permitRefreshCall(it RefreshItem, ga []any) Call {
	h := it.hold
	args := append([]any{strconv.Itoa(h.Permits), h.ID, ms(it.TTL)}, ga...)
	return permitRefresh.call([]string{it.Keys.Lock, it.Keys.Epoch, it.Keys.Fence}, append(args, it.Token)...)
}

// refreshArgs is the number of a plain lock's refresh arguments but the
// guard's: the head, numkeys, the three keys, the value and the TTL before
// them, the token after.
const refreshArgs = 9

// refreshCalls are the arguments of a batch's calls, and each call's
// script: nil when every item is a plain lock's (refresh.lua), the case of
// nearly every batch. A plain lock's arguments are cut from one array,
// with its key and value boxed by the lock (Boxed) and the epoch record's
// key and the TTL boxed once for the run of items that share them: a
// refresh then allocates on the client only its counter's key and its
// token, boxed, besides the driver's command.
func refreshCalls(items []RefreshItem, ga []any) (cmds [][]any, scripts []*luaScript) {
	cmds = make([][]any, len(items))
	plain := 0
	for _, it := range items {
		if it.script == nil {
			plain++
		}
	}
	if plain < len(items) {
		scripts = make([]*luaScript, len(items))
	}
	buf := make([]any, 0, plain*(refreshArgs+len(ga)))
	cmd, arg := refresh.head()
	var epochKey string
	var epoch, ttl any
	ttlOf := time.Duration(-1)
	for i, it := range items {
		if it.script != nil {
			call := it.script(it, ga)
			cmds[i], scripts[i] = call.args, call.s
			continue
		}
		key, value := it.Boxed.key, it.Boxed.value
		if key == nil {
			key, value = it.Keys.Lock, it.Value
		}
		if epoch == nil || it.Keys.Epoch != epochKey {
			epochKey, epoch = it.Keys.Epoch, it.Keys.Epoch
		}
		if it.TTL != ttlOf {
			ttlOf, ttl = it.TTL, ms(it.TTL)
		}
		start := len(buf)
		buf = append(buf, cmd, arg, "3", key, epoch, it.Keys.Fence, value, ttl)
		buf = append(buf, ga...)
		buf = append(buf, it.Token)
		cmds[i] = buf[start:len(buf):len(buf)]
		if scripts != nil {
			scripts[i] = &refresh
		}
	}
	return cmds, scripts
}

// call is the item's refresh call; ga are the guard's arguments. A plain
// lock's arguments are laid out by refreshCalls alone.
func (it RefreshItem) call(ga []any) Call {
	if it.script != nil {
		return it.script(it, ga)
	}
	cmds, _ := refreshCalls([]RefreshItem{it}, ga)
	return Call{args: cmds[0], s: &refresh}
}

// RefreshBatch runs the refresh script for every item on one node in one
// pipeline, re-running with EVAL those the node answered NOSCRIPT. It
// returns each item's result and error; err is set when the node itself
// failed (a network error or timeout), and then no item's result counts.
func RefreshBatch(ctx context.Context, n driver.Node, items []RefreshItem, g Guard) (results []RefreshResult, errs []error, err error) {
	cmds, scripts := refreshCalls(items, g.args())
	replies, err := n.Pipe(ctx, cmds)
	if err != nil {
		return nil, nil, err
	}
	var again []int
	for i, r := range replies {
		if reply.HasPrefix(r.Err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		retry := make([][]any, len(again))
		for j, i := range again {
			s := &refresh
			if scripts != nil {
				s = scripts[i]
			}
			retry[j] = withHead(cmds[i], [2]any{"eval", s.src})
		}
		retried, err := n.Pipe(ctx, retry)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range again {
			replies[i] = retried[j]
		}
	}
	results = make([]RefreshResult, len(items))
	errs = make([]error, len(items))
	for i, r := range replies {
		v, err := reply.Int64(r.Val, r.Err)
		switch {
		case err != nil:
			errs[i] = err
		case v < 0 || v > 4:
			errs[i] = fmt.Errorf("redlock: unexpected refresh reply %d", v)
		default:
			results[i] = RefreshResult(v)
		}
	}
	return results, errs, nil
}
