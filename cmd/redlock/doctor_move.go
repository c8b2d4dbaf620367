package main

import (
	"fmt"
	"net"
	"strings"
)

// Doctor on a move (--next-nodes): every check runs on each set, and the
// checks below across the two sets.

// crossChecks compares each node of the current set with each node of the
// next set that is not the same node (same address, as the library
// matches them; same reports it): one redis-server process under two
// addresses, a replica of the other, or a shared replication history. It
// returns the checks and, per set, the nodes a failed check counts as
// failed (the next set's node of such a pair: the current set's one still
// votes there).
func crossChecks(cur, next []nodeProbe, same func(i, j int) bool) ([]check, map[int]bool) {
	curName := func(i int) string { return fmt.Sprintf("current %d (%s)", i, cur[i].spec.label) }
	nextName := func(j int) string { return fmt.Sprintf("next %d (%s)", j, next[j].spec.label) }
	var checks []check
	bad := map[int]bool{}
	fail := func(name string, i, j int, format string, args ...any) {
		checks = append(checks, check{Check: name, Node: fmt.Sprintf("current %d, next %d", i, j), Verdict: verdictFail, Detail: fmt.Sprintf(format, args...)})
		bad[j] = true
	}
	compared, unknown := 0, 0
	for i := range cur {
		for j := range next {
			if same(i, j) {
				continue
			}
			a, b := cur[i].up(), next[j].up()
			if len(a) == 0 || len(b) == 0 || len(a) < len(cur[i].servers) || len(b) < len(next[j].servers) || cur[i].err != nil || next[j].err != nil {
				unknown++
			} else {
				compared++
			}
			why := crossPair(a, b, cur[i].spec.kind == cluster || next[j].spec.kind == cluster)
			switch why.kind {
			case "":
			case "distinct":
				fail("distinct", i, j, "nodes %s and %s are the same redis-server process under two addresses (run_id %.12s…): in joint configuration it would cast two votes, and the next set has one independent node fewer than it seems",
					curName(i), nextName(j), why.id)
			case "replica":
				fail("replica", i, j, "node %s is a replica of node %s: the next set must hold independent masters, not copies of the current set",
					pick(why.nextIsReplica, nextName(j), curName(i)), pick(why.nextIsReplica, curName(i), nextName(j)))
			default:
				fail("replica", i, j, "nodes %s and %s share a replication history (master_replid %.12s…): they are not independent",
					curName(i), nextName(j), why.id)
			}
		}
	}
	if len(checks) == 0 {
		switch {
		case unknown == 0:
			checks = append(checks, check{Check: "distinct", Node: "across sets", Verdict: verdictOK,
				Detail: "no node of the next set is a node of the current set under another address, a replica of one, or shares its replication history"})
		case compared == 0:
			checks = append(checks, check{Check: "distinct", Node: "across sets", Verdict: verdictSkip,
				Detail: "no pair of a current and a next node both answered: nothing compared across the sets"})
		default:
			checks = append(checks, check{Check: "distinct", Node: "across sets", Verdict: verdictWarn,
				Detail: fmt.Sprintf("%d pairs of a current and a next node compared, none one process or replicas; %d pairs unknown (a node did not answer fully)", compared, unknown)})
		}
	}
	return checks, bad
}

type crossWhy struct {
	kind          string // "", "distinct", "replica", "history"
	id            string
	nextIsReplica bool
}

// crossPair compares the servers of a current node (a) with those of a
// next node (b).
func crossPair(a, b []serverProbe, cluster bool) crossWhy {
	for _, x := range a {
		for _, y := range b {
			if id := x.info["run_id"]; id != "" && id == y.info["run_id"] {
				return crossWhy{kind: "distinct", id: id}
			}
		}
	}
	replicaOf := func(r, m serverProbe) bool {
		if r.info["role"] != "slave" {
			return false
		}
		master := net.JoinHostPort(r.info["master_host"], r.info["master_port"])
		return sameEndpoint(m.addr, master) || hasReplica(m.info, r.addr) ||
			(m.info["role"] == "master" && m.info["master_replid"] == r.info["master_replid"])
	}
	for _, x := range a {
		for _, y := range b {
			if !cluster && replicaOf(y, x) {
				return crossWhy{kind: "replica", nextIsReplica: true}
			}
			if !cluster && replicaOf(x, y) {
				return crossWhy{kind: "replica"}
			}
			if id := x.info["master_replid"]; id != "" && strings.Trim(id, "0") != "" && id == y.info["master_replid"] {
				return crossWhy{kind: "history", id: id}
			}
		}
	}
	return crossWhy{}
}

// setHealth says why a set cannot reach a quorum of nodes that no failed
// check names; "" when it can.
func setHealth(set string, probes []nodeProbe, bad map[int]bool) string {
	n, q := len(probes), len(probes)/2+1
	var failed []string
	for i := range probes {
		if bad[i] {
			failed = append(failed, fmt.Sprintf("%s %d", set, i))
		}
	}
	if n-len(failed) >= q {
		return ""
	}
	return fmt.Sprintf("the %s set has %d of %d nodes without a FAIL row, below its quorum of %d (FAIL: %s)",
		set, n-len(failed), n, q, strings.Join(failed, ", "))
}
