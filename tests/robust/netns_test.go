//go:build linux

package robust

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock/tests/robust/history"
	"github.com/redlock-go/redlock/tests/robust/netlab"
)

// attempts is how many runs a scenario that must show something (a
// control's violation, a fault that reached a holder) gets.
const attempts = 3

// netScenario is one scenario of real network faults between namespaces.
type netScenario struct {
	name    string
	clients int
	// setup adjusts the clients' configuration.
	setup  func(l *lab, cs []clientConfig)
	inject func(ctx context.Context, l *lab)
	// control: must show a violation.
	control bool
	// d, when set, is how long the clients run, in place of
	// -robust.duration.
	d time.Duration
	// needs, when set, checks that the run exercised what it is about
	// (both clients held the lock...); the run is repeated otherwise.
	needs func(events []history.Event) bool
}

// TestPartitions runs the scenarios of real network partitions, losses and
// delays: nodes and clients in namespaces of their own, packets dropped or
// delayed between them by the lab's switch.
func TestPartitions(t *testing.T) {
	majority := []int{0, 1, 2}
	for _, sc := range []netScenario{
		{
			// A client cut off from a majority while it holds the
			// lock (its whole validity): it cannot refresh or
			// release; the others wait for the expiry.
			name: "cut-off-holder", clients: 3,
			setup: func(l *lab, cs []clientConfig) { cs[0].HoldFull = true },
			inject: func(ctx context.Context, l *lab) {
				for ctx.Err() == nil {
					if l.whenHolding(ctx, "c0", 1500*time.Millisecond) {
						l.partition(ctx, "c0", majority, time.Second)
					}
					sleepCtx(ctx, 300*time.Millisecond)
				}
			},
			needs: heldBy("c0", "c1"),
		},
		{
			// The control: the cut-off client keeps working past its
			// validity, on a store without fencing.
			name: "control-cut-off-holder-ignores-validity-unfenced", clients: 3, control: true,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].Fenced = false
				}
				cs[0].Belief, cs[0].Hold = beliefForever, 1200*time.Millisecond
			},
			inject: func(ctx context.Context, l *lab) {
				for ctx.Err() == nil {
					if l.whenHolding(ctx, "c0", 1500*time.Millisecond) {
						l.partition(ctx, "c0", majority, time.Second)
					}
					sleepCtx(ctx, 300*time.Millisecond)
				}
			},
		},
		{
			// Two clients each see a different majority, for the
			// whole run: c0 sees n0, n1, n2; c1 sees n2, n3, n4. The
			// majorities share n2.
			name: "two-majorities", clients: 2,
			inject: func(ctx context.Context, l *lab) {
				start := time.Now()
				twoMajorities(l)
				<-ctx.Done()
				l.fault("partition", "c0 | nodes [3 4]; c1 | nodes [0 1]", start, time.Now(), "two majorities sharing n2")
			},
			needs: heldBy("c0", "c1"),
		},
		{
			// The control: the node the two majorities share
			// restarts empty, without the restart guard, while one
			// of them holds the lock (for all of a 2 s TTL, so that
			// the restart is done before it ends).
			name: "control-two-majorities-restart-shared-guard-off", clients: 2, control: true,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].Guard, cs[i].HoldFull, cs[i].FastRetry = false, true, true
					cs[i].TTL, cs[i].MaxTTL = 2*time.Second, 2*time.Second
				}
			},
			inject: func(ctx context.Context, l *lab) {
				start := time.Now()
				twoMajorities(l)
				for ctx.Err() == nil {
					if l.whenHolding(ctx, "", time.Second) {
						restart(ctx, l, 2)
					}
					sleepCtx(ctx, 200*time.Millisecond)
				}
				l.fault("partition", "c0 | nodes [3 4]; c1 | nodes [0 1]", start, time.Now(), "two majorities sharing n2")
			},
		},
		{
			// A node seen by one client and not by the others: n4
			// is cut off from c1 and c2 for the whole run, and c0
			// loses n0 and n1 now and then, so that its quorum then
			// needs n4.
			name: "node-seen-by-one", clients: 3,
			inject: func(ctx context.Context, l *lab) {
				start := time.Now()
				seenByOne(l)
				for ctx.Err() == nil {
					if l.whenHolding(ctx, "c0", time.Second) {
						l.partition(ctx, "c0", []int{0, 1}, 600*time.Millisecond)
					}
					sleepCtx(ctx, 300*time.Millisecond)
				}
				l.fault("partition", "c1, c2 | node 4", start, time.Now(), "n4 seen by c0 only")
			},
			needs: heldBy("c0", "c1", "c2"),
		},
		{
			// The control: while c0 holds with n2, n3 and n4 (for
			// all of a 2 s TTL), n2 and n3 restart empty without the
			// restart guard.
			name: "control-node-seen-by-one-restart-guard-off", clients: 3, control: true,
			setup: func(l *lab, cs []clientConfig) {
				for i := range cs {
					cs[i].Guard, cs[i].FastRetry = false, true
					cs[i].TTL, cs[i].MaxTTL = 2*time.Second, 2*time.Second
				}
				cs[0].HoldFull = true
			},
			inject: func(ctx context.Context, l *lab) {
				start := time.Now()
				seenByOne(l)
				for ctx.Err() == nil {
					for _, n := range []int{0, 1} {
						_ = l.net.SetBoth("c0", l.nodes[n].name, netlab.Policy{Drop: true})
					}
					if l.whenHolding(ctx, "c0", 1500*time.Millisecond) {
						restart(ctx, l, 2, 3)
					}
					for _, n := range []int{0, 1} {
						_ = l.net.SetBoth("c0", l.nodes[n].name, netlab.Policy{})
					}
					sleepCtx(ctx, 300*time.Millisecond)
				}
				l.fault("partition", "c1, c2 | node 4; c0 | nodes [0 1] while it obtains", start, time.Now(), "n4 seen by c0 only")
			},
		},
		lossScenario("loss-30pct-every-link", 0.30, false),
		lossScenario("control-loss-5pct-client-ignores-validity", 0.05, true),
		delayScenario("delay-10ms-jitter-60ms-every-link", 100*time.Millisecond),
		delayControl(),
	} {
		t.Run(sc.name, func(t *testing.T) { runNet(t, sc) })
	}
}

// runNet runs a scenario on a fresh lab, up to attempts times when it must
// show something and did not (a control without a violation, a run that
// did not exercise the scenario); a violation outside a control fails at
// once.
func runNet(t *testing.T, sc netScenario) {
	for try := 1; try <= attempts; try++ {
		again := false
		t.Run(fmt.Sprintf("try%d", try), func(t *testing.T) {
			l := newLab(t, sc.clients, int64(try))
			var cs []clientConfig
			for _, c := range l.clients {
				cs = append(cs, baseClient(c, l))
			}
			if sc.setup != nil {
				sc.setup(l, cs)
			}
			if cs[0].Guard {
				l.waitRecovered(cs[0].MaxTTL)
			}
			d := *flagDuration
			if sc.d > 0 {
				d = sc.d
			}
			s := spec{name: sc.name, seed: int64(try), d: d, clients: cs, inject: sc.inject, control: sc.control}
			r, events := l.run(s)
			problem := verdict(s, r)
			retriable := sc.control && problem != ""
			if problem == "" && sc.needs != nil && !sc.needs(events) {
				problem, retriable = sc.name+": the run did not exercise the scenario", true
			}
			again = retriable && try < attempts
			l.conclude(s, r, events, problem, !again)
		})
		if !again {
			return
		}
	}
}

// heldBy checks that each of the clients held the lock at least once (with
// none given: that some client did).
func heldBy(clients ...string) func([]history.Event) bool {
	return func(events []history.Event) bool {
		held := map[string]bool{}
		for _, e := range events {
			if e.Type == history.TypeHold {
				held[e.Client], held[""] = true, true
			}
		}
		if len(clients) == 0 {
			return held[""]
		}
		for _, c := range clients {
			if !held[c] {
				return false
			}
		}
		return true
	}
}

// obtainedUnder checks that some client obtained the lock in an attempt
// that began while a fault of kind was on, so that its requests met the
// fault: a scenario that starts its fault after a warm-up must not pass
// on the warm-up's holds.
func obtainedUnder(kind string) func([]history.Event) bool {
	return func(events []history.Event) bool {
		for _, f := range events {
			if f.Type != history.TypeFault || f.Fault != kind {
				continue
			}
			for _, e := range events {
				if e.Type == history.TypeAttempt && e.OK && e.Inv >= f.Start && e.Inv <= f.Stop {
					return true
				}
			}
		}
		return false
	}
}

// twoMajorities cuts c0 from n3 and n4 and c1 from n0 and n1.
func twoMajorities(l *lab) {
	for _, n := range []string{"n3", "n4"} {
		_ = l.net.SetBoth("c0", n, netlab.Policy{Drop: true})
	}
	for _, n := range []string{"n0", "n1"} {
		_ = l.net.SetBoth("c1", n, netlab.Policy{Drop: true})
	}
}

// seenByOne cuts n4 from every client but c0.
func seenByOne(l *lab) {
	for _, c := range l.clients[1:] {
		_ = l.net.SetBoth(c, "n4", netlab.Policy{Drop: true})
	}
}

// restart crashes the nodes and starts them again, empty, and records it.
func restart(ctx context.Context, l *lab, nodes ...int) {
	start := time.Now()
	for _, n := range nodes {
		if err := l.nodes[n].restart(); err != nil {
			l.t.Errorf("restart n%d: %v", n, err)
		}
	}
	l.fault("restart", fmt.Sprintf("nodes %v", nodes), start, time.Now(), "")
}

// lossScenario loses p of the packets on every link between a client and
// a node, both ways. Above 10%, the TTL is 1 s and the node timeout 300 ms,
// so that a request may survive one TCP retransmission (200 ms at least):
// with 100 ms nearly no attempt succeeds. Its control's first client keeps
// working for 1.2 s (more than twice the TTL) whatever its lock's validity.
func lossScenario(name string, p float64, control bool) netScenario {
	var d time.Duration
	if p > 0.1 && !control {
		// 2 or 3 holds in 4 s: twice as long, so that a loaded
		// machine does not leave the run without one, and the warm-up.
		d = 8*time.Second + warmUp
	}
	return netScenario{
		name: name, clients: 3, control: control, d: d,
		setup: func(l *lab, cs []clientConfig) {
			for i := range cs {
				cs[i].FastRetry = true
				if p > 0.1 {
					cs[i].TTL, cs[i].MaxTTL, cs[i].NodeTimeout = 1500*time.Millisecond, 3*time.Second, 600*time.Millisecond
					// At 30 % loss, with 300 ms per node (about one TCP
					// retransmission), nodes were skipped for timing out
					// and the breaker opened on every client: runs on a
					// quiet machine ended with no hold, three tries in a
					// row (CI, 2026-11-29). The scenario is about safety
					// under loss, which needs holds to happen: 600 ms per
					// node, a TTL to match, and no breaker (3 holds a run).
					cs[i].NoBreaker = true
				}
			}
			if control {
				cs[0].Belief, cs[0].Hold = beliefForever, 1200*time.Millisecond
			}
		},
		inject: func(ctx context.Context, l *lab) {
			if !control {
				// The control's loss still starts with the run, as
				// when its violation was measured.
				sleepCtx(ctx, warmUp)
			}
			start := time.Now()
			l.everyLink(netlab.Policy{Loss: p})
			<-ctx.Done()
			l.fault("loss", "every client-node link", start, time.Now(), fmt.Sprintf("%.0f%% of packets", 100*p))
		},
		needs: obtainedUnder("loss"),
	}
}

// warmUp is how long the delay and loss scenarios (not the loss's
// control) run before their faults start, so that the clients'
// connections exist: a new connection
// costs a TCP handshake and go-redis's HELLO, three round trips, which
// delays near the node timeout rarely allow, and under 30 % loss a lost
// SYN alone costs a second (the first retransmission), past the node
// timeout. Their runs count only the locks obtained by attempts that
// began under the fault (obtainedUnder). The loss scenario started its
// loss with the run until the CI run of 2df39c3 (2026-11-30) had no hold
// in three tries: every client's first requests timed out, the nodes
// were skipped after three timeouts in a row, and the run never
// recovered.
const warmUp = time.Second

// delayScenario delays every packet between a client and a node by 10 ms
// plus up to 60 ms of jitter, each way: a round trip of 20 to 140 ms
// against the node timeout (100 ms: about a fifth of the requests time
// out), and packets reordered.
func delayScenario(name string, nodeTimeout time.Duration) netScenario {
	return netScenario{
		name: name, clients: 3,
		setup: func(l *lab, cs []clientConfig) {
			for i := range cs {
				cs[i].FastRetry, cs[i].NodeTimeout = true, nodeTimeout
			}
		},
		inject: func(ctx context.Context, l *lab) {
			sleepCtx(ctx, warmUp)
			start := time.Now()
			l.everyLink(netlab.Policy{Delay: 10 * time.Millisecond, Jitter: 60 * time.Millisecond})
			<-ctx.Done()
			l.fault("delay", "every client-node link", start, time.Now(), "10ms + jitter up to 60ms, each way")
		},
		needs: obtainedUnder("delay"),
	}
}

// delayControl is the delay scenarios' control, with two clients. c0's
// requests reach the nodes in 10 ms but its replies take 300 ms (without
// jitter: reordered packets cost TCP retransmissions); c1's links are not
// delayed. The TTL is 2 s. c0 believes it holds its lock for the whole TTL
// from Obtain's return, ignoring the time the attempt took, and keeps it
// that long: for at least the last reply's 300 ms after the nodes let its
// lock go, c0 still believes it holds. c1, retrying every 5 to 20 ms on
// fast links, obtains the lock within that window whenever it is waiting
// when c0's lock ends, which it is after each of c0's holds (it pauses
// 700 ms between its own holds, else the faster client takes every turn,
// and its Obtain is bounded by 5 s, above c0's hold). c0's node timeout
// (1.8 s) covers a new connection at its 310 ms round trip: four round
// trips (the dial, HELLO, the client-info pipeline, the request), 1.24 s.
// With 1.2 s, one request that timed out under load closed its connection
// and no new one could be set up in time, so c0 obtained nothing for the
// rest of the fault (all three tries of one CI run; reproduced by holding
// c0's replies 2.5 s for the fault's first 3 s, after which 1.8 s passed 4
// of 4). Its Obtain bound (4 s) leaves room for two rounds. An earlier
// form (a symmetric 150 ms delay on c0's links, jitter on c1's, a 1 s TTL)
// showed no violation in three tries of a loaded CI run.
func delayControl() netScenario {
	return netScenario{
		name: "control-delay-client-believes-ttl", clients: 2, control: true, d: 12 * time.Second,
		setup: func(l *lab, cs []clientConfig) {
			for i := range cs {
				cs[i].FastRetry, cs[i].TTL, cs[i].MaxTTL = true, 2*time.Second, 2*time.Second
			}
			cs[0].Belief, cs[0].HoldFull = beliefTTL, true
			cs[0].NodeTimeout, cs[0].Bound = 1800*time.Millisecond, 4*time.Second
			cs[1].NodeTimeout, cs[1].Bound, cs[1].Think = 500*time.Millisecond, 5*time.Second, 700*time.Millisecond
		},
		inject: func(ctx context.Context, l *lab) {
			sleepCtx(ctx, warmUp)
			start := time.Now()
			for _, n := range l.nodes {
				_ = l.net.Set("c0", n.name, netlab.Policy{Delay: 10 * time.Millisecond})
				_ = l.net.Set(n.name, "c0", netlab.Policy{Delay: 300 * time.Millisecond})
			}
			<-ctx.Done()
			l.fault("delay", "c0's links to every node", start, time.Now(), "requests 10ms, replies 300ms")
		},
	}
}
