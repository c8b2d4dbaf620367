package fault

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
	flagDuration = flag.Duration("fault.duration", 0, "how long each scenario's workload runs (default 4s, or 30s with -fault.long)")
	flagLong     = flag.Bool("fault.long", false, "run the long version of every scenario")
	flagReport   = flag.String("fault.report", "", "append one markdown table row per scenario to this file")
)

// duration is the workload time of one scenario.
func duration() time.Duration {
	switch {
	case *flagDuration > 0:
		return *flagDuration
	case *flagLong:
		return 30 * time.Second
	default:
		return 4 * time.Second
	}
}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the suite kills nodes on purpose.
	redis.SetLogger(quietLogger{})
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
