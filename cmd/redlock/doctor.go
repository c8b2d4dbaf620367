package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
)

var doctorHelp = helpText{
	usage: "doctor [flags]",
	about: `Checks a deployment against the assumptions of Redlock (docs/safety.md) and
prints a verdict per check: the nodes are distinct processes and not replicas
of one another; persistence and what it implies with the restart guard; no
eviction policy; clock offsets against the drift budget; round-trip times
against the per-node timeout; Redis version and scripting; Sentinel's
down-after-milliseconds against the epoch guard's δ; a Sentinel master's
min-replicas-to-write and min-replicas-max-lag against --max-ttl (split
brain); Cluster masters promoted since their process started (every new
lock name recovers on first use); each node's recovery window, read from
its epoch record, against --max-ttl (check "recovery": it fails a node
that a Client with a larger max TTL put into a longer recovery, and names
the way out, docs/fencing.md "A recovery window longer than the max TTL").

With --next-nodes, every check runs on both sets, rows labelled "current"
and "next", and across them: a next node that is a current node under
another address, a replica of one, or shares its replication history fails.
The check "move" reads the configuration records of a move from --nodes to
--next-nodes (docs/reconfiguration.md) and says which step of the runbook
is safe next: 1 (roll every service to joint), 2 (wait: a Client of the
current set alone was seen, and for how long its locks may live; or a node
of the next set lacks a fresh move floor, which a running joint Client
writes), 3 (roll every service to the next set), or done; it fails when
Clients of both sets alone are live, and calls no step safe while either
set has fewer than a quorum of nodes that no failed check names (it says
which).

Check "recovery" says when each node votes, by the restart guard as it is
today: a node without an epoch record refuses every lock until its process
start plus the max TTL; a node restarted since its record was written (or a
promoted replica) refuses every lock for the max TTL from its next guarded
acquire. A long remedy that several rows share is said once, below the
table ([remedy N]). The line "quorum" says how many nodes vote now (answer,
out of recovery) against the quorum, and from when a quorum will.

Give --ttl, --max-ttl, --restart-guard and --drift as your clients use them.

Verdict and exit status: ok or warn, 0; DEGRADED, 1: a quorum of nodes
votes, not every node, and no check failed but for unreachable nodes
(locks can be taken, with less to spare); FAIL, 1: a check failed; NO
QUORUM, 69: fewer than a quorum of nodes vote now (no lock can be taken,
as run would exit 69 or 75), 77 instead when a node refused the
credentials; 2 for a usage error, or a node without a database of its
URL's index (redis://host/99). With --json: "verdict",
"quorum" (per set: nodes, needed, voting, state full, degraded or none,
quorum_from, not_voting), "checks" (each with node, and set, index and
address apart, and remedy, a number into "remedies").`,
}

// Verdicts of a check.
const (
	verdictOK   = "ok"
	verdictWarn = "warn"
	verdictFail = "FAIL"
	verdictSkip = "skip"
)

// minRedisVersion is the oldest Redis the scripts run on: SET with NX and
// PX, and redis.set_repl with effects replication by default (Redis 5),
// which the restart guard uses to keep its fast-path key off replicas.
var minRedisVersion = [3]int{5, 0, 0}

type check struct {
	Check string `json:"check"`
	// Node is the node column of the table: the set, the node's index and
	// address ("current 0 10.0.0.1:6379"), "all", or a pair ("1, 2").
	Node string `json:"node"`
	// Set, Index and Address say Node's parts apart: Index is null for
	// a row of no single node.
	Set     string `json:"set,omitempty"`
	Index   *int   `json:"index"`
	Address string `json:"address,omitempty"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
	// Remedy is the number of the report's remedy for the row (from 1),
	// said once in Remedies; 0 for none.
	Remedy int `json:"remedy,omitempty"`
	// nodes are the indexes of the nodes a failed check counts as
	// failed, beside the node its row names.
	nodes []int
	// Pair is a row of two nodes' indexes (one server given twice, a
	// shared history).
	Pair []int `json:"nodes,omitempty"`
}

type doctorReport struct {
	// Verdict is ok, warn, DEGRADED, FAIL or NO QUORUM (verdictOf).
	Verdict string `json:"verdict"`
	// Quorum is how many nodes vote now, one entry per set.
	Quorum   []quorumState `json:"quorum"`
	Checks   []check       `json:"checks"`
	Remedies []string      `json:"remedies"`
}

// defaultDoctorTTL is doctor's --ttl unless --max-ttl is shorter.
const defaultDoctorTTL = 10 * time.Second

type doctorConfig struct {
	prefix  string // of the locks' keys: the epoch records are under it
	ttl     time.Duration
	drift   float64
	guard   guardFlags
	timeout time.Duration
}

// budget is the clock drift allowance of a lock with the TTL
// (limits.DriftAllowance).
func (c doctorConfig) budget() time.Duration {
	return limits.DriftAllowance(c.ttl, c.drift)
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("doctor", stdout, stderr)
	fs := cmd.fs
	var (
		nf  nodeFlags
		nx  nextFlag
		cfg doctorConfig
	)
	prefix := fs.String("prefix", limits.Prefix, "prefix of the locks' Redis keys (WithPrefix): the epoch records and the move's records are under it")
	fs.DurationVar(&cfg.ttl, "ttl", defaultDoctorTTL, ttlUsage("the shortest lock TTL your clients use (for the strictest checks)", defaultDoctorTTL))
	fs.Float64Var(&cfg.drift, "drift", limits.DriftFactor, "the drift factor your clients use (WithDriftFactor)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	nf.register(fs)
	nx.register(fs)
	cfg.guard.register(fs)
	if code, ok := cmd.parse(doctorHelp, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(cmd.stderr, "redlock doctor: unexpected argument %q\nRun \"redlock doctor --help\" for usage.\n", fs.Arg(0))
		return exitUsage
	}
	cfg.guard.fitTTL(fs, &cfg.ttl, defaultDoctorTTL)
	specs, _, err := nf.resolve()
	if err == nil {
		err = cfg.validate()
	}
	var next []*nodeSpec
	if err == nil {
		next, _, err = nx.resolve(&nf)
	}
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	cfg.timeout = nf.timeout
	cfg.prefix = *prefix
	conns := openAll(specs, nf.timeout)
	defer closeAll(conns)

	rep := doctorReport{Remedies: []string{}}
	if len(next) == 0 {
		probes := probeAll(ctx, conns, cfg.timeout)
		readEpochs(ctx, cfg, conns, probes)
		rep.Checks = diagnose(cfg, probes)
		rep.Quorum = []quorumState{tally(cfg, probes, "")}
	} else {
		nextConns := openAll(next, nf.timeout)
		defer closeAll(nextConns)
		rep.Checks, rep.Quorum = doctorMove(ctx, cfg, conns, nextConns, *prefix)
	}
	rep.collectRemedies()
	rep.Verdict = verdictOf(rep.Checks, rep.Quorum)
	if *asJSON {
		if !cmd.printJSON(rep) {
			return exitError
		}
	} else {
		rep.print(cmd.stdout)
	}
	return exitOf(rep.Verdict, rep.Quorum)
}

func (c doctorConfig) validate() error {
	if _, err := c.guard.options(); err != nil {
		return err
	}
	if err := c.guard.checkTTL(c.ttl); err != nil {
		return err
	}
	if !(c.drift >= 0 && c.drift < 0.5) { // NaN too
		return usagef("--drift %v: outside [0, 0.5)", c.drift)
	}
	return nil
}

// doctorMove runs every check on both sets of a move, rows labelled
// "current" and "next", the checks across the two sets, and the move
// check. No step of the runbook is called safe unless each set has a
// quorum of nodes no failed check names: every lock of a joint Client
// needs a quorum of both sets, and of the next set alone after step 3.
func doctorMove(ctx context.Context, cfg doctorConfig, conns, nextConns []conn, prefix string) ([]check, []quorumState) {
	var curProbes, nextProbes []nodeProbe
	done := make(chan struct{})
	go func() { defer close(done); nextProbes = probeAll(ctx, nextConns, cfg.timeout) }()
	curProbes = probeAll(ctx, conns, cfg.timeout)
	<-done
	readEpochs(ctx, cfg, conns, curProbes)
	readEpochs(ctx, cfg, nextConns, nextProbes)
	checks, curBad := diagnoseSet(cfg, curProbes, "current")
	nextChecks, nextBad := diagnoseSet(cfg, nextProbes, "next")
	checks = append(checks, nextChecks...)
	cross, crossBad := crossChecks(curProbes, nextProbes, func(i, j int) bool {
		return addrOf(conns[i].rc) == addrOf(nextConns[j].rc)
	})
	checks = append(checks, cross...)
	for j := range crossBad {
		nextBad[j] = true
	}
	sortChecks(checks)
	mc := moveCheck(ctx, conns, nextConns, prefix, cfg.timeout)
	var why []string
	for _, w := range []string{setHealth("current", curProbes, curBad), setHealth("next", nextProbes, nextBad)} {
		if w != "" {
			why = append(why, w)
		}
	}
	if len(why) > 0 {
		mc.Verdict = verdictFail
		mc.Detail = "no step is safe: " + strings.Join(why, "; ") +
			"; every lock in joint configuration needs a quorum of both sets, and after step 3 of the next set: fix the failed checks first (the records alone say: " + mc.Detail + ")"
	}
	return append(checks, mc), []quorumState{tally(cfg, curProbes, "current"), tally(cfg, nextProbes, "next")}
}
