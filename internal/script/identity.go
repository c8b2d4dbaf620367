package script

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redlock-go/redlock/driver"
)

var (
	//go:embed id.lua
	idSrc string
	//go:embed runid.lua
	runIDSrc string
)

var identify = newScript(runIDSrc + "\n" + idSrc)

// Identity is a node's identity (id.lua) and its Redis process's run_id
// ("" when INFO is refused).
type Identity struct {
	ID    string
	RunID string
}

// NewIdentity is a new random node identity: 64 bits, in hex.
func NewIdentity() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Identify reads the node's identity at key (keys.Layout.NodeID), writing
// a new random one when it has none, and the run_id of the process that
// answered: alone (a Client's first contact), by the library's function
// as at the end of an acquire's pipeline (identifyCall), so that it
// reads INFO once per process too, or by EVALSHA where the node cannot
// run functions; a function refused before it runs is read again by EVAL
// (identified).
func Identify(ctx context.Context, n driver.Node, key string) (Identity, error) {
	c := identifyCall(key)
	v, err := run(ctx, n, &identify, c.fn)
	return identified(ctx, n, driver.Reply{Val: v, Err: err}, c)
}

// identifyCall is id.lua's call with key: alone (Identify), or at the end
// of an acquire's pipeline (AcquireIdentified, AcquireRecorded), a
// function of the library, as the acquire is, or where the node cannot
// run functions EVAL of the script's source, where a NOSCRIPT would cost
// the acquire before it a second run. As a function it reads INFO once
// per process (runid.lua).
func identifyCall(key string) *fnCall {
	fn := []any{identifyFn[0], identifyFn[1], "1", key, NewIdentity()}
	return &fnCall{fn: fn, eval: withHead(fn, [2]any{"eval", identify.src})}
}

func decodeIdentity(v any) (Identity, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return Identity{}, fmt.Errorf("redlock: unexpected identity reply %v", v)
	}
	id, ok1 := a[0].(string)
	run, ok2 := a[1].(string)
	if !ok1 || !ok2 || id == "" {
		return Identity{}, fmt.Errorf("redlock: unexpected identity reply %v", v)
	}
	return Identity{ID: id, RunID: run}, nil
}

// IsOtherNode reports whether err is a script's refusal to give a vote on
// a server whose identity is not its Guard's Node (epoch.lua's node_is):
// the address now reaches another server than the node identified.
func IsOtherNode(err error) bool {
	return driver.IsReply(err) && strings.HasPrefix(err.Error(), "REDLOCK_NODE ")
}
