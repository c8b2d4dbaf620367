package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

var planHelp = helpText{
	usage: "plan [flags]",
	about: `Answers three questions of planning a deployment (docs/safety.md, "How many
nodes"), with no node contacted:

  redlock plan -n 5 -p 0.1             the chance that no quorum can be reached
  redlock plan -p 0.1 --target 1e-4    the smallest odd number of nodes that
                                       meets a target chance
  redlock plan --ttl 10s               the validity a lock of that TTL has left

Each node is unavailable (down, unreachable, recovering) independently of
the others with probability p, and the chance of no quorum is that more than
n - q of the n nodes are unavailable at once (binomial). plan takes p as
given: take it from your nodes' own record (the share of a month each was
down or unreachable). It measures nothing, and doctor's one probe per node
is no measure of p. Independent means separate hosts, power, racks or
zones: nodes that fail together (one hypervisor, one zone) count as one,
and the real chance is higher than the formula's. Without a quorum no lock
can be obtained or refreshed: the chance is of unavailability, never of two
holders.

-n and -p take comma-separated lists: one row per n, one column per p.
--next and --shared give the joint configuration of a move from n nodes to
--next nodes of which --shared are in both sets (docs/reconfiguration.md):
every lock needs a quorum of each set, a shared node counting for both.
--permits k gives a semaphore of k permits, whose quorum is the library's
floor(n*k/(k+1))+1 (a lock's for k = 1). --ttl gives the validity left:
TTL less the drift allowance (TTL times --drift, plus a fixed part), as
the library computes it, and what is left after a round that waited a
whole default per-node timeout.

A number of nodes that fewer nodes beat (an even number for a lock: 4 does
worse than 3) gets a note below the table, and "fewer_nodes_do_better" in
JSON, which has every field of a row even when it is 0 (next_nodes 0: no
move). --markdown prints every table in Markdown, with the same text around.

Exit status: 0; 1 when no odd number of nodes up to the most a Client takes
meets --target; 2 for a usage error.`,
}

// planConfig is what plan was asked.
type planConfig struct {
	ns           []int     // -n
	ps           []float64 // -p
	next, shared int
	permits      int
	target       float64
	ttl          time.Duration
	drift        float64
	asJSON       bool
	markdown     bool
	given        map[string]bool
}

// planRow is the chance of no quorum of one configuration and one p.
type planRow struct {
	Nodes      int     `json:"nodes"`
	Quorum     int     `json:"quorum"`
	NextNodes  int     `json:"next_nodes"`   // 0: no move
	Shared     int     `json:"shared_nodes"` // of a move
	NextQuorum int     `json:"next_quorum"`  // 0: no move
	Permits    int     `json:"permits"`
	P          float64 `json:"p"`
	NoQuorum   float64 `json:"no_quorum"`
	// Fewer is the fewer nodes that do better (fewerNodes): n-1, or 0.
	Fewer int `json:"fewer_nodes_do_better"`
}

// planTarget is the answer to --target for one p: the smallest odd number
// of nodes whose chance of no quorum is at most the target, or none.
type planTarget struct {
	P       float64 `json:"p"`
	Target  float64 `json:"target"`
	Permits int     `json:"permits"`
	Met     bool    `json:"met"`
	// Nodes, Quorum and NoQuorum are the answer's, or those of the largest
	// odd number of nodes when none meets the target.
	Nodes    int     `json:"nodes"`
	Quorum   int     `json:"quorum"`
	NoQuorum float64 `json:"no_quorum"`
}

// planValidity is what is left of a TTL.
type planValidity struct {
	TTL               string  `json:"ttl"`
	TTLMs             float64 `json:"ttl_ms"`
	Drift             float64 `json:"drift_factor"`
	AllowanceMs       float64 `json:"drift_allowance_ms"`
	ValidityMs        float64 `json:"validity_ms"`
	NodeTimeoutMs     float64 `json:"node_timeout_ms"`
	AfterTimeoutMs    float64 `json:"validity_after_node_timeout_ms"`
	validity, timeout time.Duration
	allowance         time.Duration
}

type planReport struct {
	NoQuorum []planRow     `json:"no_quorum,omitempty"`
	Target   []planTarget  `json:"target,omitempty"`
	Validity *planValidity `json:"validity,omitempty"`
}

func runPlan(_ context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("plan", stdout, stderr)
	fs := cmd.fs
	var cfg planConfig
	nList := fs.String("n", "5", "number of nodes (1 to 64), or a comma-separated `list` of them")
	pList := fs.String("p", "", "chance that a node is unavailable, in [0, 1), or a comma-separated `list`")
	fs.Float64Var(&cfg.target, "target", 0, "find the smallest odd number of nodes whose chance of no quorum\nis at most this, in (0, 1) (default none)")
	fs.IntVar(&cfg.next, "next", 0, "nodes of the next set of a move: the joint configuration\n(0: no move)")
	fs.IntVar(&cfg.shared, "shared", 0, "nodes in both the current and the next set of a move")
	fs.IntVar(&cfg.permits, "permits", 1, "permits of a semaphore (1: a lock)")
	fs.DurationVar(&cfg.ttl, "ttl", 0, "a lock TTL: print the validity it leaves (default none)")
	fs.Float64Var(&cfg.drift, "drift", limits.DriftFactor, "the drift factor your clients use (WithDriftFactor), with --ttl")
	fs.BoolVar(&cfg.asJSON, "json", false, "print JSON instead of a table")
	fs.BoolVar(&cfg.markdown, "markdown", false, "print the tables in Markdown (the text around them is Markdown as it is)")
	if code, ok := cmd.parse(planHelp, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return cmd.fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	cfg.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.given[f.Name] = true })
	if err := cfg.parse(*nList, *pList); err != nil {
		say(stderr, "plan", "%v", err)
		fmt.Fprintln(stderr, `Run "redlock plan --help" for usage.`)
		return exitUsage
	}

	var rep planReport
	code := exitOK
	switch {
	case cfg.given["target"]:
		for _, p := range cfg.ps {
			t := smallestNodes(p, cfg.target, cfg.permits)
			if !t.Met {
				code = exitError
			}
			rep.Target = append(rep.Target, t)
		}
	case len(cfg.ps) > 0:
		for _, n := range cfg.ns {
			for _, p := range cfg.ps {
				rep.NoQuorum = append(rep.NoQuorum, noQuorumRow(n, cfg.next, cfg.shared, cfg.permits, p))
			}
		}
	}
	if cfg.given["ttl"] {
		rep.Validity = validityLeft(cfg.ttl, cfg.drift)
	}

	if cfg.asJSON {
		if !cmd.printJSON(rep) {
			return exitError
		}
		return code
	}
	w := cmd.stdout
	sep := ""
	if len(rep.NoQuorum) > 0 {
		printNoQuorum(w, cfg, rep.NoQuorum)
		sep = "\n"
	}
	if len(rep.Target) > 0 {
		fmt.Fprint(w, sep)
		printTarget(w, rep.Target, cfg.markdown)
		sep = "\n"
	}
	if rep.Validity != nil {
		fmt.Fprint(w, sep)
		printValidity(w, rep.Validity, cfg.markdown)
	}
	return code
}

// parse reads and checks the flags; every error is a usage error.
func (c *planConfig) parse(nList, pList string) error {
	if !c.given["p"] {
		for _, f := range []string{"n", "target", "next", "shared", "permits", "markdown"} {
			if c.given[f] {
				return usagef("-%s needs -p, the chance that a node is unavailable", strings.Repeat("-", min(len(f)-1, 1))+f)
			}
		}
	}
	if c.given["drift"] && !c.given["ttl"] {
		return usagef("--drift needs --ttl")
	}
	if !c.given["p"] && !c.given["ttl"] {
		return usagef("nothing to plan: give -p (the chance that a node is unavailable), --ttl, or both")
	}
	if c.asJSON && c.markdown {
		return usagef("--json and --markdown: give one")
	}
	if c.given["p"] {
		for _, s := range strings.Split(pList, ",") {
			p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return usagef("-p %q: not a number", s)
			}
			if !(p >= 0 && p < 1) { // NaN too
				return usagef("-p %v: outside [0, 1)", p)
			}
			c.ps = append(c.ps, p)
		}
	}
	for _, s := range strings.Split(nList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return usagef("-n %q: not a whole number", s)
		}
		if n < 1 || n > limits.MaxNodes {
			return usagef("-n %d: outside 1 to %d (the most nodes a Client takes)", n, limits.MaxNodes)
		}
		c.ns = append(c.ns, n)
	}
	if c.permits < 1 || c.permits > limits.MaxPermits {
		return usagef("--permits %d: outside 1 to %d", c.permits, limits.MaxPermits)
	}
	if c.given["target"] {
		if !(c.target > 0 && c.target < 1) {
			return usagef("--target %v: outside (0, 1)", c.target)
		}
		if c.given["n"] {
			return usagef("-n and --target: --target finds the number of nodes; give one of them")
		}
		if c.given["next"] || c.given["shared"] {
			return usagef("--target finds the nodes of one set; --next and --shared are not taken with it")
		}
	}
	if c.given["shared"] && c.next == 0 {
		return usagef("--shared needs --next, the nodes of the next set")
	}
	if c.next != 0 {
		if c.next < 1 || c.next > limits.MaxNodes {
			return usagef("--next %d: outside 1 to %d", c.next, limits.MaxNodes)
		}
		for _, n := range c.ns {
			if c.shared < 0 || c.shared > min(n, c.next) {
				return usagef("--shared %d: outside 0 to %d, the smaller set (-n %d, --next %d)", c.shared, min(n, c.next), n, c.next)
			}
			if u := n + c.next - c.shared; u > limits.MaxNodes {
				return usagef("-n %d, --next %d, --shared %d: %d nodes together; a Client takes at most %d", n, c.next, c.shared, u, limits.MaxNodes)
			}
		}
	}
	if c.given["ttl"] {
		if c.ttl < limits.MinTTL || c.ttl > limits.MaxMaxTTL {
			return usagef("--ttl %v: outside %v to %v", c.ttl, limits.MinTTL, limits.MaxMaxTTL)
		}
		if c.ttl%time.Millisecond != 0 {
			return usagef("--ttl %v: not whole milliseconds (Redis counts milliseconds; the library drops the rest)", c.ttl)
		}
		if !(c.drift >= 0 && c.drift < 0.5) { // NaN too
			return usagef("--drift %v: outside [0, 0.5)", c.drift)
		}
	}
	return nil
}

// quorumOf is the library's quorum of n nodes for a semaphore of k
// permits, a lock's for k = 1 (kind.go).
func quorumOf(n, k int) int {
	if k == 1 {
		return limits.Majority(n)
	}
	return limits.PermitQuorum(n, k)
}

// noQuorumRow is the chance of no quorum on n nodes (in a move to next
// nodes, shared of them in both sets, when next > 0), for k permits.
func noQuorumRow(n, next, shared, k int, p float64) planRow {
	row := planRow{Nodes: n, Quorum: quorumOf(n, k), Permits: k, P: p}
	if next == 0 {
		row.NoQuorum = noQuorum([3]int{n, 0, 0}, quorum.Count(row.Quorum), p)
		row.Fewer = fewerNodes(n, k)
		return row
	}
	row.NextNodes, row.Shared, row.NextQuorum = next, shared, quorumOf(next, k)
	sizes := [3]int{n - shared, shared, next - shared}
	a, b := nodeBits(0, n), nodeBits(n-shared, next)
	row.NoQuorum = noQuorum(sizes, quorum.Joint(a, row.Quorum, b, row.NextQuorum), p)
	return row
}

// fewerNodes is n-1 when n-1 nodes do better than n for k permits: as
// many of them may be down, and fewer can fail, so their chance of no
// quorum is lower at every p in (0, 1) (4 nodes and 3, 6 and 5: an even
// number of nodes for a lock). It is 0 otherwise.
func fewerNodes(n, k int) int {
	if n < 2 || n-quorumOf(n, k) != n-1-quorumOf(n-1, k) {
		return 0
	}
	return n - 1
}

// nodeBits is the mask of count nodes from index first.
func nodeBits(first, count int) uint64 {
	if count == 0 {
		return 0
	}
	return ^uint64(0) >> (64 - count) << first
}

// noQuorum is the chance that the nodes that are up make no quorum of
// rule, each node unavailable independently with probability p. The nodes
// are numbered in three groups of the given sizes (the current set's own,
// the shared, the next set's own); the nodes of a group are alike, so it
// sums over how many of each group are down, with the binomial weight of
// each count, and asks rule of one state of each.
func noQuorum(sizes [3]int, rule quorum.Rule, p float64) float64 {
	total := sizes[0] + sizes[1] + sizes[2]
	var sum float64
	for i := 0; i <= sizes[0]; i++ {
		for j := 0; j <= sizes[1]; j++ {
			for l := 0; l <= sizes[2]; l++ {
				// The first nodes of each group are down, the rest up.
				up := nodeBits(i, sizes[0]-i) |
					nodeBits(sizes[0]+j, sizes[1]-j) |
					nodeBits(sizes[0]+sizes[1]+l, sizes[2]-l)
				if rule.Met(up) {
					continue
				}
				down := i + j + l
				sum += choose(sizes[0], i) * choose(sizes[1], j) * choose(sizes[2], l) *
					math.Pow(p, float64(down)) * math.Pow(1-p, float64(total-down))
			}
		}
	}
	return sum
}

// choose is the binomial coefficient C(n, k), exact in a float64 for
// n ≤ 64 up to rounding of the last bit.
func choose(n, k int) float64 {
	k = min(k, n-k)
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return c
}

// smallestNodes is the smallest odd number of nodes, up to the most a
// Client takes, whose chance of no quorum is at most target.
func smallestNodes(p, target float64, k int) planTarget {
	t := planTarget{P: p, Target: target, Permits: k}
	for n := 1; n <= limits.MaxNodes; n += 2 {
		row := noQuorumRow(n, 0, 0, k, p)
		t.Nodes, t.Quorum, t.NoQuorum = n, row.Quorum, row.NoQuorum
		if row.NoQuorum <= target {
			t.Met = true
			break
		}
	}
	return t
}

// validityLeft is what the library leaves of a lock's TTL: the TTL less
// the drift allowance (limits.DriftAllowance, as options.go's validity),
// and that less the default per-node timeout (limits.NodeTimeout), the
// longest a round waits for a node.
func validityLeft(ttl time.Duration, drift float64) *planValidity {
	allow := limits.DriftAllowance(ttl, drift)
	timeout := limits.NodeTimeout(ttl)
	v := &planValidity{
		TTL: ttl.String(), TTLMs: ms(ttl), Drift: drift,
		AllowanceMs: ms(allow), ValidityMs: ms(ttl - allow),
		NodeTimeoutMs: ms(timeout), AfterTimeoutMs: ms(ttl - allow - timeout),
		validity: ttl - allow, timeout: timeout, allowance: allow,
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// chance formats a probability with three significant digits.
func chance(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }

// printNoQuorum prints the chances of no quorum, one row per number of
// nodes and one column per p, and a note for each number of nodes that
// fewer nodes beat.
func printNoQuorum(w io.Writer, cfg planConfig, rows []planRow) {
	what := "a lock"
	if cfg.permits > 1 {
		what = fmt.Sprintf("a semaphore of %d permits", cfg.permits)
	}
	fmt.Fprintf(w, "Chance that no quorum can be reached for %s, each node unavailable\nindependently with probability p", what)
	if cfg.next > 0 {
		fmt.Fprint(w, ", during a move: a quorum of each set is needed,\na shared node counting for both")
	}
	fmt.Fprint(w, ":\n\n")
	cells := [][]string{{"nodes", "quorum", "may be down"}}
	for _, p := range cfg.ps {
		cells[0] = append(cells[0], "p="+strconv.FormatFloat(p, 'g', -1, 64))
	}
	var notes []string
	for i := 0; i < len(rows); i += len(cfg.ps) {
		r := rows[i]
		line := []string{strconv.Itoa(r.Nodes), strconv.Itoa(r.Quorum), strconv.Itoa(r.Nodes - r.Quorum)}
		if r.NextNodes > 0 {
			line = []string{
				fmt.Sprintf("%d, next %d (%d shared)", r.Nodes, r.NextNodes, r.Shared),
				fmt.Sprintf("%d and %d", r.Quorum, r.NextQuorum),
				fmt.Sprintf("%d and %d", r.Nodes-r.Quorum, r.NextNodes-r.NextQuorum),
			}
		}
		for _, x := range rows[i : i+len(cfg.ps)] {
			line = append(line, chance(x.NoQuorum))
		}
		cells = append(cells, line)
		if r.Fewer > 0 {
			notes = append(notes, fewerNote(r, cfg.permits))
		}
	}
	if !cfg.markdown {
		cells[0] = append([]string{"NODES", "QUORUM", "MAY BE DOWN"}, cells[0][3:]...)
	}
	printTable(w, cfg.markdown, cells)
	for _, n := range notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

// fewerNote says that r.Fewer nodes do better than r.Nodes.
func fewerNote(r planRow, permits int) string {
	what := "a lock"
	if permits > 1 {
		what = "this semaphore"
	}
	return fmt.Sprintf("Note: %d nodes do better than %d for %s: as many may be down (%d), and fewer\ncan fail, so their chance of no quorum is lower at every p above 0.",
		r.Fewer, r.Nodes, what, r.Nodes-r.Quorum)
}

// printTable prints cells, the first line the header, as a Markdown table
// or aligned in columns.
func printTable(w io.Writer, markdown bool, cells [][]string) {
	if markdown {
		for i, line := range cells {
			fmt.Fprintf(w, "| %s |\n", strings.Join(line, " | "))
			if i == 0 {
				fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(line)))
			}
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, line := range cells {
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	_ = tw.Flush()
}

func printTarget(w io.Writer, ts []planTarget, markdown bool) {
	what := "a lock"
	if ts[0].Permits > 1 {
		what = fmt.Sprintf("a semaphore of %d permits", ts[0].Permits)
	}
	fmt.Fprintf(w, "Smallest odd number of nodes whose chance of no quorum for %s is at\nmost %s, each node unavailable independently with probability p:\n\n", what, chance(ts[0].Target))
	cells := [][]string{{"p", "nodes", "quorum", "no quorum"}}
	if !markdown {
		cells[0] = []string{"P", "NODES", "QUORUM", "NO QUORUM"}
	}
	for _, t := range ts {
		p := strconv.FormatFloat(t.P, 'g', -1, 64)
		if t.Met {
			cells = append(cells, []string{p, strconv.Itoa(t.Nodes), strconv.Itoa(t.Quorum), chance(t.NoQuorum)})
		} else {
			cells = append(cells, []string{p, "none", "", fmt.Sprintf("%d nodes give %s", t.Nodes, chance(t.NoQuorum))})
		}
	}
	printTable(w, markdown, cells)
}

func printValidity(w io.Writer, v *planValidity, markdown bool) {
	fmt.Fprintf(w, "A lock with TTL %s and drift factor %s:\n\n", v.TTL, strconv.FormatFloat(v.Drift, 'g', -1, 64))
	drift := strconv.FormatFloat(v.Drift, 'g', -1, 64)
	cells := [][]string{
		{"drift allowance", v.allowance.String(), fmt.Sprintf("TTL × %s + %v", drift, limits.DriftFixed)},
		{"validity left", v.validity.String(), "at most: less the time the round took"},
		{"per-node timeout", v.timeout.String(), "the default (WithNodeTimeout): the longest a round waits"},
		{"after a slow round", (v.validity - v.timeout).String(), "validity left after a round that waited the whole timeout"},
	}
	if markdown {
		cells = append([][]string{{"", "value", "meaning"}}, cells...)
	}
	printTable(w, markdown, cells)
}
