//go:build linux

package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/tests/robust/failpoint"
	"github.com/redlock-go/redlock/tests/robust/history"
)

// TestFailpoints runs the faults at points of the protocol (package
// failpoint), in the clients' own processes: a node's reply held back
// before the client decides, the second round's fence held back, a batched
// refresh delayed or its replies lost.
func TestFailpoints(t *testing.T) {
	majority := []int{0, 1, 2}
	all := []int{0, 1, 2, 3, 4}
	fp := func(point string, nodes []int, prob float64, delay time.Duration, drop bool) failpoint.Spec {
		return failpoint.Spec{Point: point, Nodes: nodes, Prob: prob, Delay: delay, Drop: drop}
	}
	for _, sc := range []netScenario{
		{
			// A majority's replies to an acquire are held back 70 ms
			// (less than the node timeout, 100 ms: a reply held
			// longer counts as none): the quorum waits for them, and
			// the validity shrinks by as much; clients hold the lock
			// for all of it.
			name: "failpoint-acquire-reply-delay", clients: 3,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].HoldFull = true
				cs[i].Failpoints = []failpoint.Spec{fp(failpoint.AcquireReply, majority, 1, 70*time.Millisecond, false)}
			}),
			needs: fired(failpoint.AcquireReply),
		},
		{
			// The control: c0, whose replies from n0, n1 and n2 are
			// all held back (so that its quorum waits), believes
			// it holds the lock for the whole TTL from Obtain's
			// return. (The others' replies are not held back: their
			// own delays would cancel c0's; and c1 pauses 300 ms
			// between holds, else the faster client takes every turn.)
			// The replies are held back 250 ms, under a node timeout
			// of 400 ms: c0 holds 250 ms past its lock, a window that
			// c1, woken at the lock's expiry, does not miss under load.
			name: "control-failpoint-acquire-reply-delay-client-believes-ttl", clients: 2, control: true,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].HoldFull, cs[i].FastRetry, cs[i].Think = true, true, 300*time.Millisecond
				cs[i].NodeTimeout = controlNodeTimeout
				if i == 0 {
					cs[i].Belief, cs[i].Think = beliefTTL, 0
					cs[i].Failpoints = []failpoint.Spec{fp(failpoint.AcquireReply, majority, 1, controlDelay, false)}
				}
			}),
		},
		{
			// Replies to acquires are lost on two nodes, a third of
			// the time, after the node took the lock: attempts fail
			// that a node thinks won, and the nodes' fencing counters
			// drift apart.
			name: "failpoint-acquire-reply-lost", clients: 3,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].Failpoints = []failpoint.Spec{fp(failpoint.AcquireReply, []int{3, 4}, 0.3, 0, true)}
			}),
			needs: fired(failpoint.AcquireReply),
		},
		{
			// The second round: the fencing counter of one node is
			// raised now and then (as lost acquires do), so that the
			// yes-votes disagree and the acquire fences; each fence is
			// held back 70 ms before it is sent (less than the node
			// timeout: a fence held back longer fails the attempt).
			name: "failpoint-fence-delay", clients: 3,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].HoldFull = true
				cs[i].Failpoints = []failpoint.Spec{fp(failpoint.Fence, all, 1, 70*time.Millisecond, false)}
			}),
			inject: bumpCounters,
			needs:  fired(failpoint.Fence),
		},
		{
			// The control: c0, whose fences are held back (250 ms,
			// under a node timeout of 400 ms), believes it holds the
			// lock for the whole TTL from Obtain's return, fence or
			// not; c1 pauses 300 ms between holds.
			name: "control-failpoint-fence-delay-client-believes-ttl", clients: 2, control: true,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].HoldFull, cs[i].FastRetry, cs[i].Think = true, true, 300*time.Millisecond
				cs[i].NodeTimeout = controlNodeTimeout
				if i == 0 {
					cs[i].Belief, cs[i].Think = beliefTTL, 0
					cs[i].Failpoints = []failpoint.Spec{fp(failpoint.Fence, all, 1, controlDelay, false)}
				}
			}),
			inject: bumpCounters,
		},
		{
			// Automatically refreshed locks held for two TTLs; the
			// replies of a majority's batched refreshes are lost 90%
			// of the time (the nodes extended the lock): the lock is
			// reported lost, and its holder gives up its work.
			name: "failpoint-refresh-batch-lost", clients: 3,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].Auto, cs[i].Hold = true, time.Second
				cs[i].Failpoints = []failpoint.Spec{fp(failpoint.RefreshBatch, majority, 0.9, 0, true)}
			}),
			needs: all2(fired(failpoint.RefreshBatch), lostHold),
		},
		{
			// The control: the holders ignore the loss and finish
			// their work, on a store without fencing.
			name: "control-failpoint-refresh-batch-lost-client-ignores-loss-unfenced", clients: 3, control: true,
			setup: failpoints(func(cs []clientConfig, i int) {
				cs[i].Auto, cs[i].Hold, cs[i].Fenced, cs[i].Belief = true, time.Second, false, beliefForever
				cs[i].Failpoints = []failpoint.Spec{fp(failpoint.RefreshBatch, majority, 0.9, 0, true)}
			}),
		},
	} {
		t.Run(sc.name, func(t *testing.T) { runNet(t, sc) })
	}
}

// The delay controls' failpoints hold replies or fences back controlDelay,
// under a node timeout of controlNodeTimeout.
const (
	controlDelay       = 250 * time.Millisecond
	controlNodeTimeout = 400 * time.Millisecond
)

// failpoints returns a setup that calls f for each client, and makes the
// failpoints it sets last the whole run.
func failpoints(f func(cs []clientConfig, i int)) func(*lab, []clientConfig) {
	return func(l *lab, cs []clientConfig) {
		start := time.Now()
		for i := range cs {
			f(cs, i)
			for j := range cs[i].Failpoints {
				cs[i].Failpoints[j].Start = start.UnixNano()
				cs[i].Failpoints[j].Stop = start.Add(time.Hour).UnixNano()
			}
			cs[i].Seed = uint64(i + 1)
		}
	}
}

// fired checks that a failpoint at point fired.
func fired(point string) func([]history.Event) bool {
	return func(events []history.Event) bool {
		for _, e := range events {
			if e.Type == history.TypeFault && e.Fault == "failpoint "+point && e.Count > 0 {
				return true
			}
		}
		return false
	}
}

// lostHold checks that some holder found its lock lost and gave up.
func lostHold(events []history.Event) bool {
	for _, e := range events {
		if e.Type == history.TypeHold && e.Lost {
			return true
		}
	}
	return false
}

func all2(a, b func([]history.Event) bool) func([]history.Event) bool {
	return func(e []history.Event) bool { return a(e) && b(e) }
}

// bumpCounters raises the fencing counter of one node, drawn at random,
// every 30 ms, so that nearly every acquire sees counters that disagree and
// fences.
func bumpCounters(ctx context.Context, l *lab) {
	lockKey, err := keys.Layout{Prefix: "redlock:"}.Lock(lockName)
	if err != nil {
		l.t.Error(err)
		return
	}
	var rcs []*redis.Client
	for _, a := range l.nodeAddrs() {
		rc := nodeClient(a, 0)
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	start := time.Now()
	n := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for ctx.Err() == nil && n < 10000 {
		c := rcs[rng.IntN(len(rcs))]
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if c.IncrBy(cctx, keys.Fence(lockKey), 1+rng.Int64N(1000)).Err() == nil {
			n++
		}
		cancel()
		sleepCtx(ctx, 30*time.Millisecond)
	}
	l.fault("counter-bump", "one node at a time", start, time.Now(),
		fmt.Sprintf("%d raises of %s on a random node", n, keys.Fence(lockKey)))
}
