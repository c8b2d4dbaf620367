package main

import (
	"encoding/json"
	"math"
	"math/big"
	"math/bits"
	"os"
	"strings"
	"testing"
)

// The tests below compute every chance a second way, exactly, with
// math/big.Rat and the quorums written out from their formulas
// (docs/safety.md): a majority n/2+1, a permit quorum n*k/(k+1)+1.

// ratP are the chances of a node being unavailable that the tests use, as
// exact fractions.
var ratP = []*big.Rat{
	big.NewRat(0, 1), big.NewRat(1, 100), big.NewRat(1, 20), big.NewRat(1, 10),
	big.NewRat(3, 20), big.NewRat(1, 2), big.NewRat(9, 10),
}

func ratFloat(r *big.Rat) float64 { f, _ := r.Float64(); return f }

// exactNoQuorum is the binomial sum: the chance that more than n-q of n
// nodes are down, each with probability p.
func exactNoQuorum(n, q int, p *big.Rat) *big.Rat {
	sum := new(big.Rat)
	up := new(big.Rat).Sub(big.NewRat(1, 1), p)
	for d := n - q + 1; d <= n; d++ {
		term := new(big.Rat).SetInt(new(big.Int).Binomial(int64(n), int64(d)))
		term.Mul(term, ratPow(p, d))
		term.Mul(term, ratPow(up, n-d))
		sum.Add(sum, term)
	}
	return sum
}

func ratPow(x *big.Rat, k int) *big.Rat {
	r := big.NewRat(1, 1)
	for range k {
		r.Mul(r, x)
	}
	return r
}

// closeTo reports whether got is within a relative 1e-12 of want (or
// exactly 0 when want is).
func closeTo(got float64, want *big.Rat) bool {
	w := ratFloat(want)
	if w == 0 {
		return got == 0
	}
	return math.Abs(got-w) <= 1e-12*w
}

func planJSON(t *testing.T, args ...string) (planReport, result) {
	t.Helper()
	r := runCLI(t, append([]string{"plan", "--json"}, args...)...)
	var rep planReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %v", err, r)
	}
	return rep, r
}

// TestPlanArticleExample: five nodes, each down with probability 0.1, have
// no quorum with probability 0.00856 (10·0.1³·0.9² + 5·0.1⁴·0.9 + 0.1⁵).
func TestPlanArticleExample(t *testing.T) {
	rep, r := planJSON(t, "-n", "5", "-p", "0.1")
	if r.code != exitOK || len(rep.NoQuorum) != 1 {
		t.Fatalf("%v", r)
	}
	row := rep.NoQuorum[0]
	if row.Nodes != 5 || row.Quorum != 3 || math.Abs(row.NoQuorum-0.00856) > 1e-12 {
		t.Errorf("row %+v, want 5 nodes, quorum 3, 0.00856", row)
	}
	r = runCLI(t, "plan", "-n", "5", "-p", "0.1")
	if r.code != exitOK || !strings.Contains(r.stdout, "0.00856") {
		t.Errorf("table without 0.00856: %v", r)
	}
}

// TestPlanNoQuorumBinomial compares every n the library takes (1 to 64)
// at several p with the exact binomial sum.
func TestPlanNoQuorumBinomial(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, p := range ratP {
			row := noQuorumRow(n, 0, 0, 1, ratFloat(p))
			if row.Quorum != n/2+1 {
				t.Fatalf("n=%d: quorum %d", n, row.Quorum)
			}
			if want := exactNoQuorum(n, n/2+1, p); !closeTo(row.NoQuorum, want) {
				t.Errorf("n=%d p=%v: %v, want %v", n, p.RatString(), row.NoQuorum, want.FloatString(20))
			}
		}
	}
}

// TestPlanPermits: a semaphore of k permits needs n*k/(k+1)+1 nodes.
func TestPlanPermits(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4, 7, 1024} {
		for _, n := range []int{1, 2, 3, 5, 7, 9, 64} {
			q := n*k/(k+1) + 1
			for _, p := range ratP {
				row := noQuorumRow(n, 0, 0, k, ratFloat(p))
				if row.Quorum != q {
					t.Fatalf("n=%d k=%d: quorum %d, want %d", n, k, row.Quorum, q)
				}
				if want := exactNoQuorum(n, q, p); !closeTo(row.NoQuorum, want) {
					t.Errorf("n=%d k=%d p=%v: %v, want %v", n, k, p.RatString(), row.NoQuorum, want.FloatString(20))
				}
			}
		}
	}
	rep, r := planJSON(t, "-n", "5", "-p", "0.1", "--permits", "4")
	if r.code != exitOK || rep.NoQuorum[0].Quorum != 5 || !closeTo(rep.NoQuorum[0].NoQuorum, exactNoQuorum(5, 5, big.NewRat(1, 10))) {
		t.Errorf("--permits 4 on 5 nodes: %v", r)
	}
}

// exactJoint enumerates every state of the union of a move's two sets
// (the current set's nodes 0..n-1, the next set's n-shared..n-shared+next-1)
// and adds the chances of those in which either set lacks its quorum.
func exactJoint(n, next, shared, k int, p *big.Rat) *big.Rat {
	u := n + next - shared
	a := uint64(1)<<n - 1
	b := (uint64(1)<<next - 1) << (n - shared)
	qa, qb := n*k/(k+1)+1, next*k/(k+1)+1
	upP := new(big.Rat).Sub(big.NewRat(1, 1), p)
	sum := new(big.Rat)
	for up := uint64(0); up < 1<<u; up++ {
		if bits.OnesCount64(up&a) >= qa && bits.OnesCount64(up&b) >= qb {
			continue
		}
		nUp := bits.OnesCount64(up)
		term := ratPow(p, u-nUp)
		sum.Add(sum, term.Mul(term, ratPow(upP, nUp)))
	}
	return sum
}

// TestPlanJointEnumerated compares the joint configuration's chance with
// an enumeration of every state of the union, for overlapping and
// disjoint sets, locks and semaphores; for disjoint sets it is also
// 1 - (1-Pa)(1-Pb).
func TestPlanJointEnumerated(t *testing.T) {
	for _, tc := range []struct{ n, next, shared int }{
		{3, 5, 0}, {3, 5, 1}, {3, 5, 2}, {3, 5, 3}, {5, 5, 3}, {5, 7, 4}, {1, 3, 1}, {5, 3, 0}, {7, 5, 0}, {4, 6, 2},
	} {
		for _, k := range []int{1, 2, 3} {
			for _, p := range ratP {
				row := noQuorumRow(tc.n, tc.next, tc.shared, k, ratFloat(p))
				if want := exactJoint(tc.n, tc.next, tc.shared, k, p); !closeTo(row.NoQuorum, want) {
					t.Errorf("%+v k=%d p=%v: %v, want %v", tc, k, p.RatString(), row.NoQuorum, want.FloatString(20))
				}
				if tc.shared == 0 {
					pa := exactNoQuorum(tc.n, tc.n*k/(k+1)+1, p)
					pb := exactNoQuorum(tc.next, tc.next*k/(k+1)+1, p)
					one := big.NewRat(1, 1)
					both := new(big.Rat).Mul(new(big.Rat).Sub(one, pa), new(big.Rat).Sub(one, pb))
					if want := new(big.Rat).Sub(one, both); !closeTo(row.NoQuorum, want) {
						t.Errorf("%+v k=%d p=%v: %v, want the product's %v", tc, k, p.RatString(), row.NoQuorum, want.FloatString(20))
					}
				}
			}
		}
	}
	// The largest union a Client takes: 64 nodes, one set inside the other.
	row := noQuorumRow(64, 33, 33, 1, 0.1)
	if row.NoQuorum < noQuorumRow(64, 0, 0, 1, 0.1).NoQuorum || row.NoQuorum > 1 {
		t.Errorf("64 and 33 shared: %v", row.NoQuorum)
	}
	rep, r := planJSON(t, "-n", "3", "-p", "0.1", "--next", "5", "--shared", "2")
	if r.code != exitOK || len(rep.NoQuorum) != 1 || rep.NoQuorum[0].NextQuorum != 3 ||
		!closeTo(rep.NoQuorum[0].NoQuorum, exactJoint(3, 5, 2, 1, big.NewRat(1, 10))) {
		t.Errorf("joint: %v", r)
	}
}

// TestPlanTarget: the answer meets the target and no smaller odd number of
// nodes does, by the exact sums.
func TestPlanTarget(t *testing.T) {
	for _, tc := range []struct {
		p      *big.Rat
		target string
		want   int
	}{
		{big.NewRat(1, 10), "0.01", 5},
		{big.NewRat(1, 10), "0.001", 9},
		{big.NewRat(1, 100), "1e-6", 7},
		{big.NewRat(1, 10), "0.2", 1},
		{big.NewRat(0, 1), "1e-9", 1},
	} {
		rep, r := planJSON(t, "-p", ratFloatString(tc.p), "--target", tc.target)
		if r.code != exitOK || len(rep.Target) != 1 || !rep.Target[0].Met || rep.Target[0].Nodes != tc.want {
			t.Errorf("p=%v target %s: %v, want %d nodes", tc.p.RatString(), tc.target, r, tc.want)
			continue
		}
		target, _ := new(big.Rat).SetString(tc.target)
		for n := 1; n <= tc.want; n += 2 {
			meets := exactNoQuorum(n, n/2+1, tc.p).Cmp(target) <= 0
			if meets != (n == tc.want) {
				t.Errorf("p=%v target %s: %d nodes meets it: %v", tc.p.RatString(), tc.target, n, meets)
			}
		}
	}
	// At p = 0.5 an odd number of nodes has no quorum half of the time:
	// no number of nodes meets 0.1.
	r := runCLI(t, "plan", "-p", "0.5", "--target", "0.1")
	if r.code != exitError || !strings.Contains(r.stdout, "none") || !strings.Contains(r.stdout, "63 nodes give 0.5") {
		t.Errorf("unreachable target: %v", r)
	}
}

func ratFloatString(r *big.Rat) string { return r.FloatString(4) }

// TestPlanValidity: TTL − TTL·drift − 2 ms, and that less the default
// per-node timeout (TTL/20, at most 1 s).
func TestPlanValidity(t *testing.T) {
	for _, tc := range []struct {
		ttl, drift          string
		validity, afterSlow float64
	}{
		{"10s", "0.01", 9898, 9398},
		{"1s", "0", 998, 948},
		{"30s", "0.05", 28498, 27498},
	} {
		rep, r := planJSON(t, "--ttl", tc.ttl, "--drift", tc.drift)
		if r.code != exitOK || rep.Validity == nil {
			t.Fatalf("%v", r)
		}
		if v := rep.Validity; v.ValidityMs != tc.validity || v.AfterTimeoutMs != tc.afterSlow {
			t.Errorf("--ttl %s --drift %s: %+v, want validity %v ms, %v after a slow round", tc.ttl, tc.drift, v, tc.validity, tc.afterSlow)
		}
	}
	r := runCLI(t, "plan", "--ttl", "10s")
	if r.code != exitOK || !strings.Contains(r.stdout, "9.898s") || !strings.Contains(r.stdout, "102ms") {
		t.Errorf("table: %v", r)
	}
}

// TestPlanMarkdown prints the table of docs/safety.md.
func TestPlanMarkdown(t *testing.T) {
	r := runCLI(t, "plan", "--markdown", "-n", "1,3,5,7", "-p", "0.01,0.05,0.1,0.15")
	want := "| nodes | quorum | may be down | p=0.01 | p=0.05 | p=0.1 | p=0.15 |\n|---|---|---|---|---|---|---|\n"
	if r.code != exitOK || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "| 5 | 3 | 2 | 9.85e-06 | 0.00116 | 0.00856 | 0.0266 |\n") {
		t.Errorf("%v", r)
	}
}

// TestPlanUsage: bad flags are refused with exit 2 and a message naming
// the problem.
func TestPlanUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "nothing to plan"},
		{[]string{"-p", "1"}, "-p 1: outside [0, 1)"},
		{[]string{"-p", "-0.1"}, "-p -0.1: outside [0, 1)"},
		{[]string{"-p", "NaN"}, "-p NaN: outside [0, 1)"},
		{[]string{"-p", "Inf"}, "-p +Inf: outside [0, 1)"},
		{[]string{"-p", "0.1,x"}, `-p "x": not a number`},
		{[]string{"-p", "0.1", "-n", "0"}, "-n 0: outside 1 to 64"},
		{[]string{"-p", "0.1", "-n", "65"}, "-n 65: outside 1 to 64"},
		{[]string{"-p", "0.1", "-n", "3.5"}, `-n "3.5": not a whole number`},
		{[]string{"-n", "5"}, "redlock plan: -n needs -p"},
		{[]string{"-p", "0.1", "--target", "0"}, "--target 0: outside (0, 1)"},
		{[]string{"-p", "0.1", "--target", "NaN"}, "--target NaN: outside (0, 1)"},
		{[]string{"-p", "0.1", "--target", "0.01", "-n", "5"}, "-n and --target"},
		{[]string{"-p", "0.1", "--target", "0.01", "--next", "3"}, "--target finds the nodes of one set"},
		{[]string{"-p", "0.1", "--shared", "1"}, "--shared needs --next"},
		{[]string{"-p", "0.1", "--next", "3", "--shared", "4"}, "--shared 4: outside 0 to 3"},
		{[]string{"-p", "0.1", "--next", "-1"}, "--next -1: outside 1 to 64"},
		{[]string{"-p", "0.1", "-n", "40", "--next", "40"}, "80 nodes together"},
		{[]string{"-p", "0.1", "--permits", "0"}, "--permits 0: outside 1 to 1024"},
		{[]string{"--ttl", "5ms"}, "--ttl 5ms: outside 10ms to 1h0m0s"},
		{[]string{"--ttl", "2h"}, "--ttl 2h0m0s: outside 10ms to 1h0m0s"},
		{[]string{"--ttl", "10.5ms"}, "not whole milliseconds"},
		{[]string{"--ttl", "10s", "--drift", "0.5"}, "--drift 0.5: outside [0, 0.5)"},
		{[]string{"--ttl", "10s", "--drift", "NaN"}, "--drift NaN: outside [0, 0.5)"},
		{[]string{"--drift", "0.1"}, "--drift needs --ttl"},
		{[]string{"-p", "0.1", "--json", "--markdown"}, "give one"},
		{[]string{"-p", "0.1", "extra"}, `unexpected argument "extra"`},
		{[]string{"-p", "0.1", "--nodes", "redis://x"}, "unknown flag --nodes"},
	} {
		r := runCLI(t, append([]string{"plan"}, tc.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "redlock plan: ") || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("plan %v: want exit 2 and %q\n%v", tc.args, tc.msg, r)
		}
	}
}

// TestPlanTablesInSafetyDoc: the tables of docs/safety.md, section 8, are
// what the commands it gives print.
func TestPlanTablesInSafetyDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/safety.md")
	if err != nil {
		t.Fatal(err)
	}
	ps := []string{"-p", "0.01,0.05,0.1,0.15"}
	for _, args := range [][]string{
		{"-n", "1,3,5,7"},
		{"-n", "1,3,5,7", "--permits", "2"},
		{"-n", "1,3,5,7", "--permits", "4"},
		{"-n", "3", "--next", "5", "--shared", "3"},
		{"-n", "5", "--next", "5", "--shared", "4"},
		{"-n", "5", "--next", "5", "--shared", "0"},
		{"-n", "5", "--next", "3", "--shared", "3"},
	} {
		r := runCLI(t, append(append([]string{"plan", "--markdown"}, args...), ps...)...)
		if r.code != exitOK {
			t.Fatalf("%v: %v", args, r)
		}
		for line := range strings.SplitSeq(r.stdout, "\n") {
			if strings.HasPrefix(line, "| ") && !strings.Contains(string(doc), line+"\n") {
				t.Errorf("docs/safety.md lacks the row %q of plan --markdown %v", line, args)
			}
		}
	}
}

// TestPlanPapercuts (issue 49): an even number of nodes gets a note that
// one fewer does better; --markdown prints every table in Markdown; the
// JSON keeps a row's fields when they are 0.
func TestPlanPapercuts(t *testing.T) {
	r := runCLI(t, "plan", "-n", "3,4", "-p", "0.1")
	if r.code != exitOK || !strings.Contains(r.stdout, "Note: 3 nodes do better than 4") || strings.Contains(r.stdout, "than 3 ") {
		t.Errorf("want a note for 4 nodes only: %v", r)
	}
	if r := runCLI(t, "plan", "-n", "4", "--next", "5", "--shared", "3", "-p", "0.1"); strings.Contains(r.stdout, "Note:") {
		t.Errorf("a note on a move's row: %v", r)
	}
	r = runCLI(t, "plan", "--markdown", "-n", "4", "-p", "0.1", "--ttl", "10s")
	for _, want := range []string{"| 4 | 3 | 1 | 0.0523 |\n", "Note: 3 nodes do better than 4", "| validity left | 9.898s |"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("--markdown: want %q: %v", want, r)
		}
	}
	if r := runCLI(t, "plan", "--markdown", "--target", "0.001", "-p", "0.1"); r.code != exitOK || !strings.Contains(r.stdout, "| 0.1 | 9 | 5 | 0.000891 |\n") {
		t.Errorf("--markdown --target: %v", r)
	}
	r = runCLI(t, "plan", "--json", "-n", "5", "--next", "5", "--shared", "0", "-p", "0")
	var rep struct {
		NoQuorum []map[string]any `json:"no_quorum"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.NoQuorum) != 1 {
		t.Fatalf("--json: %v: %v", err, r)
	}
	for _, f := range []string{"nodes", "quorum", "next_nodes", "shared_nodes", "next_quorum", "permits", "p", "no_quorum", "fewer_nodes_do_better"} {
		if _, ok := rep.NoQuorum[0][f]; !ok {
			t.Errorf("--json: the row lacks %q: %v", f, r)
		}
	}
}
