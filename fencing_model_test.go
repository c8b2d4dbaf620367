package redlock

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A randomized model of the fencing-token protocol (docs/fencing.md):
// simulated nodes with clocks that are off by up to a bound, counters,
// epochs and recovery windows; acquisitions that reach random subsets of the
// nodes; restarts that lose data, failovers that lose the latest writes,
// counters that expire. It checks that every token handed out is greater
// than every token handed out before, and that removing any part of the
// protocol breaks that: the test can fail.

type modelNode struct {
	offset     int64 // this node's clock minus real time, ms
	counter    int64 // 0: missing
	counterEp  int   // epoch the counter was written in
	lastUse    int64 // real time of the counter's last write
	epoch      int
	recovering int64 // real time until which the node may not vote
	restarts   []int64
	// snapshot is the counter as a replica last saw it; a failover rolls
	// back to it.
	snapshot, snapshotEp int64
}

type modelConfig struct {
	noSecondRound bool // hand out the maximum without raising the counters
	noEpochSeed   bool // continue a missing or old-epoch counter instead of seeding it from the clock
	noGuard       bool // a node votes again right after a restart
}

const (
	modelNodes    = 5
	modelQuorum   = modelNodes/2 + 1
	modelMaxTTL   = 10_000 // ms
	modelMaxSkew  = modelMaxTTL / 2
	modelFenceTTL = 10 * modelMaxTTL
)

// runModel plays one random history and returns a description of the first
// token that was not above an earlier one, or "".
func runModel(seed uint64, cfg modelConfig) string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	nodes := make([]*modelNode, modelNodes)
	for i := range nodes {
		// Clocks off by up to ±maxSkew: within the assumption that any two
		// nodes differ by less than maxTTL.
		nodes[i] = &modelNode{offset: rng.Int64N(2*modelMaxSkew+1) - modelMaxSkew}
	}
	now := int64(1_000_000_000) // real time, ms
	var last int64
	for step := range 400 {
		now += rng.Int64N(3 * modelMaxTTL / 2)
		switch ev := rng.IntN(10); {
		case ev == 0:
			modelRestart(rng, nodes, now, cfg, false)
		case ev == 1:
			modelRestart(rng, nodes, now, cfg, true)
		case ev == 2:
			// A counter idle for its whole expiry disappears.
			n := nodes[rng.IntN(modelNodes)]
			if n.counter != 0 && now-n.lastUse >= modelFenceTTL {
				n.counter = 0
			}
		default:
			token, ok := modelAcquire(rng, nodes, now, cfg)
			if !ok {
				continue
			}
			if token <= last {
				return fmt.Sprintf("step %d: token %d after %d", step, token, last)
			}
			last = token
		}
	}
	return ""
}

// modelRestart loses a node's data (restart) or its latest writes (a
// failover to a replica), keeping to the assumption that at most a minority
// of the nodes lose data within one recovery window.
func modelRestart(rng *rand.Rand, nodes []*modelNode, now int64, cfg modelConfig, failover bool) {
	recent := 0
	for _, n := range nodes {
		for _, r := range n.restarts {
			if now-r < modelMaxTTL {
				recent++
				break
			}
		}
	}
	if recent >= modelNodes-modelQuorum {
		return
	}
	n := nodes[rng.IntN(modelNodes)]
	if failover {
		n.counter, n.counterEp = n.snapshot, int(n.snapshotEp)
	} else {
		n.counter = 0
	}
	n.epoch++
	n.restarts = append(n.restarts, now)
	if !cfg.noGuard {
		n.recovering = now + modelMaxTTL
	}
}

// modelAcquire is one acquisition: a random subset of the nodes answers;
// each that may vote advances its counter as acquire.lua does; the token is
// the maximum, made safe by a second round when the votes disagree.
func modelAcquire(rng *rand.Rand, nodes []*modelNode, now int64, cfg modelConfig) (int64, bool) {
	var votes []int64
	for _, n := range nodes {
		if rng.IntN(4) == 0 || now < n.recovering {
			continue // did not answer, or recovering
		}
		if rng.IntN(3) == 0 {
			n.snapshot, n.snapshotEp = n.counter, int64(n.counterEp) // replicated
		}
		c := n.counter
		if !cfg.noEpochSeed && (c == 0 || n.counterEp != n.epoch) {
			c = max(c, (now+n.offset)*1024)
		}
		c++
		n.counter, n.counterEp, n.lastUse = c, n.epoch, now
		votes = append(votes, c)
	}
	if len(votes) < modelQuorum {
		return 0, false
	}
	token := votes[0]
	for _, v := range votes {
		token = max(token, v)
	}
	equal := 0
	for _, v := range votes {
		if v == token {
			equal++
		}
	}
	if equal >= modelQuorum || cfg.noSecondRound {
		return token, true
	}
	confirmed := 0
	for _, n := range nodes {
		if rng.IntN(4) == 0 {
			continue // did not answer the second round
		}
		if n.counter < token {
			n.counter = token
		}
		n.lastUse = now
		confirmed++
	}
	return token, confirmed >= modelQuorum
}

func TestFencingModel(t *testing.T) {
	const runs = 3000
	count := func(cfg modelConfig) (int, string) {
		bad, first := 0, ""
		for seed := range uint64(runs) {
			if v := runModel(seed, cfg); v != "" {
				if bad == 0 {
					first = fmt.Sprintf("seed %d: %s", seed, v)
				}
				bad++
			}
		}
		return bad, first
	}
	if bad, first := count(modelConfig{}); bad != 0 {
		t.Fatalf("the protocol broke monotonicity in %d of %d histories; first: %s", bad, runs, first)
	}
	for name, cfg := range map[string]modelConfig{
		"without the second round":       {noSecondRound: true},
		"without seeding from the clock": {noEpochSeed: true},
		"without the recovery window":    {noGuard: true},
	} {
		bad, first := count(cfg)
		if bad == 0 {
			t.Errorf("%s: no violation in %d histories; the model cannot tell this part matters", name, runs)
			continue
		}
		t.Logf("%s: %d of %d histories break monotonicity (e.g. %s)", name, bad, runs, first)
	}
}
