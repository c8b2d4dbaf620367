//go:build linux

package robust

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/tests/robust/history"
	"github.com/redlock-go/redlock/tests/robust/procclock"
)

// TestClockJumps runs client processes whose own clocks jump while they
// run (package procclock: CLOCK_REALTIME and CLOCK_MONOTONIC as the Go
// runtime reads them, for time.Now, timers and deadlines alike), forward
// and back, against the library's claim that its validity arithmetic
// needs only a monotonic clock that keeps within the drift factor. Each
// jump is checked to have reached the process (what time.Now reads
// against the kernel's clocks).
func TestClockJumps(t *testing.T) {
	for _, sc := range []netScenario{
		{
			// Every hold starts with a jump of the wall clock: an hour
			// forward, then an hour back, in turn (c1 back first). The library reads
			// only the monotonic clock: no violation.
			name: "jump-realtime-forward-back-1h", clients: 2,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].HoldFull, cs[i].FastRetry = true, true
					fwd, back := clockJump{Clock: procclock.Realtime, By: time.Hour}, clockJump{Clock: procclock.Realtime, By: -time.Hour}
					if i%2 == 1 {
						fwd, back = back, fwd // c1 starts back: two holds jump both ways
					}
					cs[i].HoldJumps = []clockJump{fwd, back}
				}
			},
			needs: jumpedBothWays(procclock.Realtime),
		},
		{
			// The monotonic clocks of the clients, whose locks are
			// refreshed automatically and held for two TTLs, jump 10 s
			// forward three times in the run (as after a VM or
			// process was frozen): a lock whose validity has run out
			// is lost, never held longer than it lives on the nodes.
			name: "jump-monotonic-forward-10s", clients: 3,
			setup: func(l *lab, cs []clientConfig) {
				start := time.Now()
				for i := range cs {
					cs[i].Auto, cs[i].Hold, cs[i].FastRetry = true, time.Second, true
					for k := 1; k <= 3; k++ {
						at := start.Add(time.Duration(k)*time.Second + time.Duration(i)*150*time.Millisecond)
						cs[i].ClockJumps = append(cs[i].ClockJumps, clockJump{At: at.UnixNano(), Clock: procclock.Monotonic, By: 10 * time.Second})
					}
				}
			},
			needs: all2(heldBy(), jumped(procclock.Monotonic, 6)),
		},
		{
			// The control of the wall clock's jumps: c0 works out the
			// end of its validity on the wall clock, and its wall clock
			// jumps 1 s back after each obtain: it holds 1 s too long.
			name: "control-jump-realtime-back-client-uses-wall-clock", clients: 2, control: true,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].HoldFull, cs[i].FastRetry, cs[i].Think = true, true, 300*time.Millisecond
				}
				cs[0].Belief, cs[0].Think = beliefWall, 0
				cs[0].HoldJumps = []clockJump{{Clock: procclock.Realtime, By: -time.Second}}
			},
		},
		{
			// Beyond the drift factor: c0's monotonic clock jumps
			// 600 ms back after each obtain (a clock that stood still
			// for 600 ms of a 500 ms lock, where the drift factor
			// allows 1%). The library trusts it, and c0 holds its lock
			// 600 ms too long: the limit of the validity arithmetic,
			// which only fencing covers (the store refuses c0's late
			// writes).
			name: "control-jump-monotonic-back-beyond-drift", clients: 2, control: true,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].HoldFull, cs[i].FastRetry, cs[i].Think = true, true, 300*time.Millisecond
				}
				cs[0].Think = 0
				cs[0].HoldJumps = []clockJump{{Clock: procclock.Monotonic, By: -600 * time.Millisecond}}
			},
		},
	} {
		t.Run(sc.name, func(t *testing.T) { runNet(t, sc) })
	}
}

// jumped checks that the clients' clocks jumped at least n times.
func jumped(c procclock.Clock, n int) func([]history.Event) bool {
	return func(events []history.Event) bool {
		k := 0
		for _, e := range events {
			if e.Type == history.TypeFault && e.Fault == faultClockJump && e.Target == c.String() {
				k++
			}
		}
		return k >= n
	}
}

// jumpedBothWays checks that the clients' clocks jumped forward and back.
func jumpedBothWays(c procclock.Clock) func([]history.Event) bool {
	return func(events []history.Event) bool {
		fwd, back := false, false
		for _, e := range events {
			if e.Type == history.TypeFault && e.Fault == faultClockJump && e.Target == c.String() {
				back = back || strings.Contains(e.Text, " -")
				fwd = fwd || strings.Contains(e.Text, " +")
			}
		}
		return fwd && back
	}
}

// faultClockJump is a clock jump's fault in a history.
const faultClockJump = "clock-jump"

// jumpTolerance is how far a jump's effect, read by the client right after
// it, may be from the jump.
const jumpTolerance = 200 * time.Millisecond

// checkJumps checks that each clock jump reached its client process: what
// its runtime read (Value) against the offset set (Prev).
func checkJumps(events []history.Event) string {
	for _, e := range events {
		if e.Type != history.TypeFault || e.Fault != faultClockJump {
			continue
		}
		if d := time.Duration(e.Value - e.Prev); d < -jumpTolerance || d > jumpTolerance {
			return fmt.Sprintf("client %s: its %s clock read %v off the kernel's after a jump to %v", e.Client, e.Target, time.Duration(e.Value), time.Duration(e.Prev))
		}
	}
	return ""
}

// jumper jumps a client process's own clocks (in the client).
type jumper struct {
	cfg   clientConfig
	out   *emitter
	t0    time.Time // the runtime's clocks at Install
	mono0 int64     // the kernel's CLOCK_MONOTONIC then
	holds int
	stop  context.CancelFunc
	done  chan struct{}
}

// newJumper installs procclock when cfg has jumps, and fires its
// ClockJumps on their schedule until close.
func newJumper(cfg clientConfig, out *emitter) (*jumper, error) {
	j := &jumper{cfg: cfg, out: out}
	if len(cfg.ClockJumps) == 0 && len(cfg.HoldJumps) == 0 {
		return j, nil
	}
	if err := procclock.Install(); err != nil {
		return nil, fmt.Errorf("the clock jumps need procclock: %w", err)
	}
	j.t0, j.mono0 = time.Now(), monoNow()
	if len(cfg.ClockJumps) > 0 {
		var ctx context.Context
		ctx, j.stop = context.WithCancel(context.Background())
		j.done = make(chan struct{})
		go j.schedule(ctx)
	}
	return j, nil
}

func (j *jumper) close() {
	if j.stop != nil {
		j.stop()
		<-j.done
	}
}

// schedule fires the ClockJumps at their times of real time (polled: the
// runtime's timers move with the jumps).
func (j *jumper) schedule(ctx context.Context) {
	defer close(j.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for _, cj := range j.cfg.ClockJumps {
		for stamp().UnixNano() < cj.At {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		j.jump(cj)
	}
}

// hold fires the next of the HoldJumps, if any: called right after each
// obtain.
func (j *jumper) hold() {
	if len(j.cfg.HoldJumps) == 0 {
		return
	}
	j.jump(j.cfg.HoldJumps[j.holds%len(j.cfg.HoldJumps)])
	j.holds++
}

// jump moves the clock and records it, with the offset the runtime reads
// right after (the reading nearest the offset set, of three: a reading
// pair cut by a preemption is off by the preemption).
func (j *jumper) jump(cj clockJump) {
	at := stamp()
	procclock.Jump(cj.Clock, cj.By)
	want := procclock.Offset(cj.Clock)
	var got time.Duration
	for k := range 3 {
		var g time.Duration
		if cj.Clock == procclock.Realtime {
			g = time.Duration(time.Now().UnixNano() - stamp().UnixNano())
		} else {
			g = time.Since(j.t0) - time.Duration(monoNow()-j.mono0)
		}
		if k == 0 || (g-want).Abs() < (got-want).Abs() {
			got = g
		}
	}
	j.out.ev(history.Event{Type: history.TypeFault, Client: j.cfg.ID, Text: cj.String(),
		FaultFields: history.FaultFields{Fault: faultClockJump, Target: cj.Clock.String(), Start: at.UnixNano(), Stop: at.UnixNano(), Count: 1},
		// The offset read, against the offset set (checkJumps).
		StoreFields: history.StoreFields{Value: int64(got), Prev: int64(want)}})
}
