//go:build linux

package robust

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/redlock-go/redlock/tests/robust/history"
)

// TestClockNamespaces runs client processes in time namespaces of their
// own (unshare --time): their CLOCK_MONOTONIC and CLOCK_BOOTTIME are offset
// from every other process's, forward by 30 days or back to 10 s after
// boot. A time namespace cannot move CLOCK_REALTIME, and its offsets are
// fixed before the process starts: no clock jumps while a client runs (see
// docs/fault-testing.md, "Clock faults in processes", for what that does
// and does not cover). Each run checks that the offset reached the client
// process, as a raw CLOCK_MONOTONIC reading.
func TestClockNamespaces(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("the clock scenarios need unshare (util-linux) for time namespaces")
	}
	back := -(time.Duration(monoNow()) - 10*time.Second)
	for _, sc := range []struct {
		name    string
		offset  time.Duration // of every client's namespace
		control bool
	}{
		{"timens-monotonic-forward-30d", 30 * 24 * time.Hour, false},
		{"timens-monotonic-back-to-10s-after-boot", back, false},
		// The control: c0's clocks are 1 s ahead (unshare takes whole
		// seconds), and it works out the end of its lock's validity
		// from a CLOCK_MONOTONIC reading of the parent process, as a
		// deadline handed from one process to another would be: it
		// holds 1 s too long.
		{"control-timens-client-trusts-another-process-monotonic", time.Second, true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sec := int64(sc.offset / time.Second)
			for try := 1; try <= attempts; try++ {
				l := newLab(t, 2, int64(try))
				var cs []clientConfig
				var prefix [][]string
				for _, c := range l.clients {
					cc := baseClient(c, l)
					cc.HoldFull, cc.FastRetry = true, true
					cs = append(cs, cc)
					off := fmt.Sprintf("%d", sec)
					prefix = append(prefix, []string{"unshare", "--time", "--kill-child", "--monotonic=" + off, "--boottime=" + off})
				}
				if sc.control {
					cs[0].Belief = beliefSharedMono
					cs[0].MonoBase, cs[0].WallBase = monoNow(), time.Now().UnixNano()
					cs[1].Think = 300 * time.Millisecond
				}
				l.waitRecovered(cs[0].MaxTTL)
				s := spec{name: sc.name, seed: int64(try), d: *flagDuration, clients: cs, prefix: prefix, control: sc.control}
				r, events := l.run(s)
				problem := verdict(s, r)
				if p := checkOffsets(events, time.Duration(sec)*time.Second); p != "" {
					problem = p
				}
				again := sc.control && problem != "" && try < attempts && r.Holds > 0
				l.conclude(s, r, events, problem, !again)
				if !again {
					return
				}
			}
		})
	}
}

// checkOffsets checks that each client's CLOCK_MONOTONIC was offset by
// want from this process's, within 2 s (the time between the readings).
func checkOffsets(events []history.Event, want time.Duration) string {
	base := time.Duration(monoNow() - time.Now().UnixNano())
	n := 0
	for _, e := range events {
		if e.Type != history.TypeNote || e.Text != "clock" {
			continue
		}
		n++
		got := time.Duration(e.Value-e.Inv) - base
		if d := got - want; d < -2*time.Second || d > 2*time.Second {
			return fmt.Sprintf("client %s: CLOCK_MONOTONIC offset %v, want %v", e.Client, got, want)
		}
	}
	if n == 0 {
		return "no client reported its clocks"
	}
	return ""
}
