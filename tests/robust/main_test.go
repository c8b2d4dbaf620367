//go:build linux

package robust

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

var (
	flagDuration = flag.Duration("robust.duration", 4*time.Second, "how long each fixed scenario's clients run")
	flagBudget   = flag.Duration("robust.budget", 30*time.Second, "the randomized runs' time budget")
	flagSeed     = flag.Int64("robust.seed", 0, "replay this seed in the randomized mode (0: a fresh seed)")
	flagSave     = flag.String("robust.save", "", "save every history (and porcupine's visualization of a violation) in this directory; also REDLOCK_ROBUST_SAVE")
	flagReport   = flag.String("robust.report", "", "append one markdown table row per run to this file")
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the scenarios cut links on purpose.
	redis.SetLogger(quietLogger{})
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runClient(cfg))
	}
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
