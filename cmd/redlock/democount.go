package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// saleCounts counts what the lock clients of a sale did (a hook on every
// instance): counts, unlike throughput, do not depend on the machine's
// load, so --compare prints them per item sold.
type saleCounts struct {
	attempts, obtains  atomic.Int64
	woken              [4]atomic.Int64 // by release, timer, turn, context
	nodeCmds, nodeUsec int64           // on the lock nodes, from INFO commandstats
	nodeCPUus          int64           // on the lock nodes, from INFO cpu
	haveNodes          bool
}

var wokenBy = [...]redlock.WokenBy{redlock.WokenByRelease, redlock.WokenByTimer, redlock.WokenByTurn, redlock.WokenByContext}

// countHook sends the events of the instances to the counts of the sale
// running (nil between sales).
type countHook struct{ cur atomic.Pointer[saleCounts] }

func (h *countHook) Observe(_ context.Context, e redlock.Event) {
	c := h.cur.Load()
	if c == nil {
		return
	}
	switch ev := e.(type) {
	case redlock.AttemptEvent:
		c.attempts.Add(1)
	case redlock.ObtainEvent:
		if ev.Err == nil {
			c.obtains.Add(1)
		}
	case redlock.WaitEvent:
		for i, w := range wokenBy {
			if ev.WokenBy == w {
				c.woken[i].Add(1)
			}
		}
	}
}

// nodeStats is the calls and CPU time of the lock nodes so far: the sum
// over nodes of every command's calls and usec (INFO commandstats) and of
// used_cpu_sys+used_cpu_user (INFO cpu), in µs. ok is false when a node
// did not answer (in-process nodes have no INFO).
func nodeStats(ctx context.Context, nodes []*redis.Client) (calls, usec, cpu int64, ok bool) {
	for _, n := range nodes {
		info, err := n.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return 0, 0, 0, false
		}
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if rest, found := strings.CutPrefix(line, "cmdstat_"); found {
				_, fields, _ := strings.Cut(rest, ":")
				if strings.HasPrefix(rest, "info:") {
					continue // our own
				}
				for _, f := range strings.Split(fields, ",") {
					k, v, _ := strings.Cut(f, "=")
					x, _ := strconv.ParseInt(v, 10, 64)
					switch k {
					case "calls":
						calls += x
					case "usec":
						usec += x
					}
				}
			}
			for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
				if v, found := strings.CutPrefix(line, k); found {
					f, _ := strconv.ParseFloat(v, 64)
					cpu += int64(f * 1e6)
				}
			}
		}
	}
	return calls, usec, cpu, true
}

// printCounts prints the counts of two sales per item sold, side by side.
func printCounts(out io.Writer, segments int, one, seg *saleCounts, oneSold, segSold int) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nper item sold\tone lock\t%d segments\n", segments)
	per := func(n int64, sold int) string {
		if sold == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(n)/float64(sold))
	}
	row := func(what string, f func(c *saleCounts) int64) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", what, per(f(one), oneSold), per(f(seg), segSold))
	}
	row("lock attempts", func(c *saleCounts) int64 { return c.attempts.Load() })
	for i, w := range wokenBy[:3] {
		row("wake-ups by "+string(w), func(c *saleCounts) int64 { return c.woken[i].Load() })
	}
	if one.haveNodes && seg.haveNodes {
		row("node commands", func(c *saleCounts) int64 { return c.nodeCmds })
		row("node command µs", func(c *saleCounts) int64 { return c.nodeUsec })
		row("node CPU µs", func(c *saleCounts) int64 { return c.nodeCPUus })
	}
	return tw.Flush()
}
