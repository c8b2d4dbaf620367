package goredis

import (
	"context"
	"testing"
)

// TestNewCmdOfAnFCallAllocatesNoMore checks that newCmd routes an FCALL
// by its first key (TestRingLocksOnEveryShard checks the routing) at the
// cost of any other command: no allocation beyond go-redis's NewCmd. It
// made one more, from strings.ToUpper of the lower-case "fcall".
func TestNewCmdOfAnFCallAllocatesNoMore(t *testing.T) {
	ctx := context.Background()
	fcall := []any{"fcall", "redlock_v_acquire", "3", "{lock}", "{lock}:fence", "{}:epoch", "value", int64(1000)}
	evalsha := append([]any{"evalsha", "0123"}, fcall[2:]...)
	want := testing.AllocsPerRun(100, func() { _ = newCmd(ctx, evalsha) })
	if got := testing.AllocsPerRun(100, func() { _ = newCmd(ctx, fcall) }); got != want {
		t.Errorf("newCmd of an FCALL allocates %v, of an EVALSHA %v: want the same", got, want)
	}
	_ = newCmd(ctx, []any{"FCALL", "f", "0"}) // no keys: no position
	_ = newCmd(ctx, []any{"fcall"})
}
