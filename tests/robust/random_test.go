//go:build linux

package robust

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/tests/robust/failpoint"
	"github.com/redlock-go/redlock/tests/robust/lockclient"
	"github.com/redlock-go/redlock/tests/robust/netlab"
	"github.com/redlock-go/redlock/tests/robust/procclock"
)

// randomRun is how long each randomized run's clients run.
const randomRun = 6 * time.Second

// maxRounds bounds the randomized runs of one budget.
const maxRounds = 1000

// TestRandomized draws runs from seeds until its time budget
// (-robust.budget) is spent: the traffic (lock kinds, contention, TTLs,
// hold times, client count, automatic refresh), the clients' clock offsets
// and rates (within the drift budget), and a schedule of faults (kind,
// target, start, duration): partitions, one-way partitions, packet loss,
// delays with jitter, node crashes and freezes, client pauses, and
// failpoints in the clients, and jumps of a client process's own clocks
// (its wall clock either way, its monotonic clock forward). Each run's seed is printed; -robust.seed
// replays one, as far as the processes' timing allows (the same draws, the
// same schedule; not the same interleaving).
func TestRandomized(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	fmt.Fprintf(os.Stderr, "robust: randomized runs from seed %d (replay one with -robust.seed=N)\n", seed)
	deadline := time.Now().Add(*flagBudget)
	for i := 0; i < maxRounds; i++ {
		s := seed + int64(i)
		t.Run(fmt.Sprintf("seed-%d", s), func(t *testing.T) { randomRound(t, s, false, true) })
		if *flagSeed != 0 || time.Now().Add(randomRun+5*time.Second).After(deadline) || t.Failed() {
			break
		}
	}
}

// TestRandomizedControl draws a run as TestRandomized does, but on a store
// without fencing and with one client that keeps working for three TTLs
// whatever its lock's validity: it must show a violation.
func TestRandomizedControl(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	fmt.Fprintf(os.Stderr, "robust: randomized control from seed %d\n", seed)
	for try := range attempts {
		s := seed + int64(try)
		if randomRound(t, s, true, try == attempts-1 || *flagSeed != 0) {
			return
		}
	}
}

// drawn is what a seed drew, for the history's header.
type drawn struct {
	Mode    string   `json:"mode"`
	Clients int      `json:"clients"`
	Faults  []string `json:"faults"`
}

// randomRound runs one randomized run and reports whether it showed a
// violation. A control without one fails the test only on its final try.
func randomRound(t *testing.T, seed int64, control, final bool) bool {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>7^0x5bd1e995))
	nclients := 2 + rng.IntN(3)
	name := "random"
	if control {
		name = "control-random-unfenced-client-ignores-validity"
	}
	var r bool
	t.Run(name, func(t *testing.T) {
		l := newLab(t, nclients, seed)
		cs, d := drawClients(rng, l, nclients)
		if control {
			for i := range cs {
				cs[i].Fenced = false
			}
			cs[0].Belief, cs[0].Hold, cs[0].HoldFull, cs[0].Auto = beliefForever, 3*cs[0].TTL, false, false
		}
		t0 := time.Now()
		faults := drawFaults(rng, l, cs, t0)
		d.Faults = nil
		for _, f := range faults {
			d.Faults = append(d.Faults, f.String())
		}
		for _, f := range d.Faults {
			t.Logf("fault: %s", f)
		}
		l.waitRecovered(cs[0].MaxTTL)
		s := spec{name: name, seed: seed, d: randomRun, clients: cs, control: control, config: d,
			inject: func(ctx context.Context, l *lab) { runFaults(ctx, l, faults, t0) }}
		res, events := l.run(s)
		problem := verdict(s, res)
		r = res.Violations()
		l.conclude(s, res, events, problem, !control || final)
		if problem != "" {
			t.Logf("replay: go test -race -run 'TestRandomized' ./tests/robust -args -robust.seed=%d", seed)
		}
	})
	return r
}

// drawClients draws the traffic.
func drawClients(rng *rand.Rand, l *lab, n int) ([]clientConfig, drawn) {
	modes := []string{"plain", "read-write", "reentrant"}
	mode := modes[rng.IntN(len(modes))]
	ttls := []time.Duration{300 * time.Millisecond, 500 * time.Millisecond, time.Second}
	ttl := ttls[rng.IntN(len(ttls))]
	var cs []clientConfig
	for i := range n {
		c := baseClient(fmt.Sprintf("c%d", i), l)
		c.Seed = rng.Uint64()
		c.TTL, c.MaxTTL = ttl, 2*ttl
		switch mode {
		case "plain":
			c.Kind = lockclient.Plain
		case "read-write":
			c.Kind = lockclient.Write
			if i > 0 && rng.IntN(2) == 0 {
				c.Kind = lockclient.Read
			}
		case "reentrant":
			c.Kind = lockclient.Reentrant
		}
		c.Hold = time.Duration(10+rng.IntN(int(ttl/time.Millisecond)/2)) * time.Millisecond
		c.Auto = rng.IntN(10) < 3
		if c.Auto {
			c.Hold = time.Duration(rng.Int64N(int64(2 * ttl)))
		}
		c.HoldFull = !c.Auto && rng.IntN(10) < 3
		c.FastRetry = rng.IntN(2) == 0
		c.Think = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond}[rng.IntN(3)]
		// A clock within the drift budget (1%): a rate off by up to
		// 0.4%, and any offset.
		c.ClockRate = 1 + (rng.Float64()-0.5)*0.008
		c.ClockOffset = time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour
		cs = append(cs, c)
	}
	return cs, drawn{Mode: mode, Clients: n}
}

// fault is one drawn fault.
type fault struct {
	kind        string
	start, dur  time.Duration // from the run's start
	client      string
	nodes       []int
	oneWayReply bool // a one-way partition's lost direction: replies (else requests)
	policy      netlab.Policy
}

func (f fault) String() string {
	s := fmt.Sprintf("%s at %v for %v", f.kind, f.start.Round(time.Millisecond), f.dur.Round(time.Millisecond))
	if f.client != "" {
		s += " client " + f.client
	}
	if len(f.nodes) > 0 {
		s += fmt.Sprintf(" nodes %v", f.nodes)
	}
	if !f.policy.IsZero() {
		s += " " + f.policy.String()
	}
	if f.kind == "one-way" {
		s += map[bool]string{true: " (replies lost)", false: " (requests lost)"}[f.oneWayReply]
	}
	return s
}

var faultKinds = []string{"partition", "one-way", "isolate-node", "loss", "delay", "crash", "freeze", "pause-client", "failpoint", faultClockJump}

// drawFaults draws 2 to 5 faults over the run; failpoints go into the
// clients' configurations (their times from t0).
func drawFaults(rng *rand.Rand, l *lab, cs []clientConfig, t0 time.Time) []fault {
	var fs []fault
	n := 2 + rng.IntN(4)
	for range n {
		f := fault{kind: faultKinds[rng.IntN(len(faultKinds))]}
		f.start = 500*time.Millisecond + time.Duration(rng.Int64N(int64(randomRun-1500*time.Millisecond)))
		f.dur = 100*time.Millisecond + time.Duration(rng.Int64N(int64(1400*time.Millisecond)))
		ci := rng.IntN(len(cs))
		f.client = cs[ci].ID
		nodes := rng.Perm(numNodes)[:1+rng.IntN(3)]
		switch f.kind {
		case "partition", "one-way":
			f.nodes = nodes
			f.oneWayReply = rng.IntN(2) == 0
		case "isolate-node", "crash", "freeze":
			f.client, f.nodes = "", nodes[:1]
		case "loss":
			f.client = ""
			f.policy = netlab.Policy{Loss: 0.05 + 0.25*rng.Float64()}
		case "delay":
			f.client = ""
			f.policy = netlab.Policy{Delay: 10 * time.Millisecond, Jitter: time.Duration(20+rng.IntN(60)) * time.Millisecond}
		case "pause-client":
		case "failpoint":
			sp := failpoint.Spec{
				Point: failpoint.Points[rng.IntN(len(failpoint.Points))],
				Nodes: nodes,
				Start: t0.Add(f.start).UnixNano(), Stop: t0.Add(f.start + f.dur).UnixNano(),
				Prob:  0.2 + 0.8*rng.Float64(),
				Delay: time.Duration(rng.IntN(70)) * time.Millisecond,
				Drop:  rng.IntN(2) == 0,
			}
			f.nodes = sp.Nodes
			f.policy = netlab.Policy{}
			cs[ci].Failpoints = append(cs[ci].Failpoints, sp)
			f.kind = "failpoint " + sp.String()
		case faultClockJump:
			// The client process's own clock jumps (procclock):
			// its wall clock by 1 s to 1 h either way, or its
			// monotonic clock forward by up to 10 s. A monotonic
			// clock going back is beyond the drift factor, which no
			// run outside a control may draw.
			j := clockJump{At: t0.Add(f.start).UnixNano(), Clock: procclock.Realtime,
				By: time.Duration(rng.Int64N(int64(time.Hour-time.Second))) + time.Second}
			if rng.IntN(2) == 0 {
				j.By = -j.By
			}
			if rng.IntN(2) == 0 {
				j.Clock, j.By = procclock.Monotonic, 100*time.Millisecond+time.Duration(rng.Int64N(int64(10*time.Second)))
			}
			f.nodes, f.dur = nil, 0
			cs[ci].ClockJumps = append(cs[ci].ClockJumps, j)
			slices.SortFunc(cs[ci].ClockJumps, func(a, b clockJump) int { return cmp.Compare(a.At, b.At) })
			f.kind = faultClockJump + " " + j.String()
		}
		fs = append(fs, f)
	}
	return fs
}

// runFaults fires the faults on their schedule and heals each after its
// duration. Failpoints fire in the clients themselves.
func runFaults(ctx context.Context, l *lab, fs []fault, t0 time.Time) {
	var wg sync.WaitGroup
	for _, f := range fs {
		if strings.HasPrefix(f.kind, "failpoint") || strings.HasPrefix(f.kind, faultClockJump) {
			continue // fired in the clients
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleepCtx(ctx, time.Until(t0.Add(f.start)))
			if ctx.Err() != nil {
				return
			}
			start := time.Now()
			fire(ctx, l, f)
			l.fault(f.kind, fmt.Sprintf("client %q nodes %v", f.client, f.nodes), start, time.Now(), f.String())
		}()
	}
	wg.Wait()
}

// fire applies f, waits its duration (or the run's end), and heals it.
func fire(ctx context.Context, l *lab, f fault) {
	node := func(i int) string { return l.nodes[i].name }
	switch f.kind {
	case "partition":
		for _, n := range f.nodes {
			_ = l.net.SetBoth(f.client, node(n), netlab.Policy{Drop: true})
		}
		sleepCtx(ctx, f.dur)
		for _, n := range f.nodes {
			_ = l.net.SetBoth(f.client, node(n), netlab.Policy{})
		}
	case "one-way":
		for _, n := range f.nodes {
			from, to := f.client, node(n)
			if f.oneWayReply {
				from, to = to, from
			}
			_ = l.net.Set(from, to, netlab.Policy{Drop: true})
		}
		sleepCtx(ctx, f.dur)
		for _, n := range f.nodes {
			_ = l.net.SetBoth(f.client, node(n), netlab.Policy{})
		}
	case "isolate-node":
		for _, c := range l.clients {
			_ = l.net.SetBoth(c, node(f.nodes[0]), netlab.Policy{Drop: true})
		}
		sleepCtx(ctx, f.dur)
		for _, c := range l.clients {
			_ = l.net.SetBoth(c, node(f.nodes[0]), netlab.Policy{})
		}
	case "loss", "delay":
		l.everyLink(f.policy)
		sleepCtx(ctx, f.dur)
		l.everyLink(netlab.Policy{})
	case "crash":
		if err := l.nodes[f.nodes[0]].restart(); err != nil {
			l.t.Errorf("restart %s: %v", node(f.nodes[0]), err)
		}
	case "freeze":
		l.nodes[f.nodes[0]].freeze()
		sleepCtx(ctx, f.dur)
		l.nodes[f.nodes[0]].thaw()
	case "pause-client":
		l.mu.Lock()
		var k *kid
		for _, x := range l.kids {
			if x.id == f.client {
				k = x
			}
		}
		l.mu.Unlock()
		if k != nil {
			k.pause(f.dur)
		}
	}
}
