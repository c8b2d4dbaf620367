package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// lineRecorder is a slog.Handler that keeps each line as its level, its
// message and its attributes.
type lineRecorder struct{ lines *[]string }

func (h lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h lineRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h lineRecorder) WithGroup(string) slog.Handler            { return h }
func (h lineRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	*h.lines = append(*h.lines, line)
	return nil
}

// TestNodeLogger: the log lines about a round's nodes are of the skipped
// and the recovering ones only, each node's condition at most once a
// minute; none without a logger.
func TestNodeLogger(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config{now: clock.now}
	nl := nodeLogger{cfg: &cfg}
	recovering := recoveringError(time.Second, time.Minute)
	round := func(reasons ...Reason) []NodeResult {
		var nodes []NodeResult
		for i, r := range reasons {
			n := NodeResult{Node: i, Addr: fmt.Sprintf("10.0.0.%d:6379", i), Reason: r}
			switch r {
			case ReasonSkipped:
				n.Err = ErrNodeSkipped
			case ReasonRecovering:
				n.Err = recovering
			case ReasonHeld:
				n.Err = ErrHeld
			case ReasonTimeout:
				n.Err = ErrNodeTimeout
			}
			nodes = append(nodes, n)
		}
		return nodes
	}
	ctx := context.Background()
	// No logger: nothing logged, and nothing counted against the limit.
	nl.nodes(ctx, round(ReasonSkipped, ReasonRecovering))
	var lines []string
	cfg.logger = slog.New(lineRecorder{&lines})
	logged := func(what string, want ...string) {
		t.Helper()
		if !slices.Equal(lines, want) {
			t.Errorf("%s: logged\n%s\nwant\n%s", what, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		lines = nil
	}
	skipped := func(i int) string {
		return fmt.Sprintf("WARN redlock: node skipped after repeated timeouts node=%d addr=10.0.0.%d:6379", i, i)
	}
	recov := func(i int) string {
		return fmt.Sprintf("INFO redlock: node recovering after a restart or failover node=%d addr=10.0.0.%d:6379 reason=%s", i, i, recovering)
	}
	nl.nodes(ctx, round(ReasonSkipped, ReasonRecovering, "", ReasonHeld, ReasonTimeout))
	logged("first round", skipped(0), recov(1))
	clock.set(clock.now().Add(30 * time.Second))
	nl.nodes(ctx, round(ReasonSkipped, ReasonRecovering, ReasonRecovering))
	logged("30s later", recov(2))
	nl.nodes(ctx, round(ReasonRecovering, ReasonSkipped))
	logged("30s later, the conditions swapped", recov(0), skipped(1))
	clock.set(clock.now().Add(31 * time.Second))
	nl.nodes(ctx, round(ReasonSkipped, ReasonRecovering, ReasonRecovering))
	logged("61s after the first", skipped(0), recov(1))
}
