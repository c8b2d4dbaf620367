package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/redistest"
)

// row returns the check of the given name whose node column starts with
// node, or a zero check.
func row(rep doctorReport, name, node string) check {
	for _, c := range rep.Checks {
		if c.Check == name && strings.HasPrefix(c.Node, node) {
			return c
		}
	}
	return check{}
}

// TestDoctorChecksNextSet: with --next-nodes, every check runs on the next
// set too, its rows labelled "next", and no step of the move is called
// safe while a set has no quorum of healthy nodes (issue 38, item 1).
func TestDoctorChecksNextSet(t *testing.T) {
	cur := redistest.Start(t, 3)
	settle(t, cur...)
	t.Run("two next nodes down, the third evicts", func(t *testing.T) {
		lru := redistest.Start(t, 1, redistest.Options{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
		settle(t, lru...)
		next := "redis://" + closedAddr(t) + ",redis://" + closedAddr(t) + "," + nodesFlag(lru...)
		rep, r := doctor(t, "--timeout", "300ms", "--nodes", nodesFlag(cur...), "--next-nodes", next)
		if r.code != exitUnavailable || rep.Verdict != verdictNoQuorum {
			t.Errorf("exit %d, verdict %s, want %d and NO QUORUM: %v", r.code, rep.Verdict, exitUnavailable, r)
		}
		for _, k := range [][2]string{{"reachable", "next 0 "}, {"reachable", "next 1 "}, {"eviction", "next 2 "}} {
			if c := row(rep, k[0], k[1]); c.Verdict != verdictFail {
				t.Errorf("%s %s: %+v, want FAIL", k[0], k[1], c)
			}
		}
		for _, k := range [][2]string{{"reachable", "current 0 "}, {"eviction", "current 2 "}, {"nodes", "next all"}, {"nodes", "current all"}} {
			if c := row(rep, k[0], k[1]); c.Verdict != verdictOK {
				t.Errorf("%s %s: %+v, want ok", k[0], k[1], c)
			}
		}
		mv := row(rep, "move", "all")
		if mv.Verdict != verdictFail || !strings.Contains(mv.Detail, "no step is safe: the next set has 0 of 3 nodes without a FAIL row, below its quorum of 2") || strings.Contains(mv.Detail, "current set has") {
			t.Errorf("move: %+v", mv)
		}
		// The table says the same.
		tr := runCLI(t, "doctor", agedMaxTTL, "--timeout", "300ms", "--nodes", nodesFlag(cur...), "--next-nodes", next)
		if tr.code != exitUnavailable || !strings.Contains(tr.stdout, "next 2 127.0.0.1:") || !strings.Contains(tr.stdout, "no step is safe") || !strings.Contains(tr.stdout, "verdict: NO QUORUM") || !strings.Contains(tr.stdout, "quorum: next set: 1 of 3 nodes vote, 2 needed") {
			t.Errorf("table: %v", tr)
		}
	})
	t.Run("the current set broken", func(t *testing.T) {
		next := redistest.Start(t, 3)
		settle(t, next...)
		curNodes := "redis://" + closedAddr(t) + ",redis://" + closedAddr(t) + "," + nodesFlag(cur[0])
		rep, r := doctor(t, "--timeout", "300ms", "--nodes", curNodes, "--next-nodes", nodesFlag(next...))
		if mv := row(rep, "move", "all"); r.code != exitUnavailable || mv.Verdict != verdictFail || !strings.Contains(mv.Detail, "the current set has 1 of 3 nodes") {
			t.Errorf("move with the current set down: %+v: %v", mv, r)
		}
	})
	t.Run("a replica of a current node in the next set", func(t *testing.T) {
		fresh := redistest.Start(t, 2)
		replica := redistest.Start(t, 1, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(cur[0].Port())}})
		settle(t, append(fresh, replica...)...)
		rep, r := doctor(t, "--nodes", nodesFlag(cur...), "--next-nodes", nodesFlag(fresh[0], fresh[1], replica[0]))
		c := row(rep, "replica", "current 0, next 2")
		if r.code != exitError || c.Verdict != verdictFail || !strings.Contains(c.Detail, "next 2 (") || !strings.Contains(c.Detail, "is a replica of node current 0") {
			t.Errorf("replica across sets: %+v: %v", c, r)
		}
		if c := row(rep, "replica", "next 2 "); c.Verdict != verdictFail {
			t.Errorf("replica row of next 2: %+v", c)
		}
		// Two healthy next nodes of three: a quorum, so the step is
		// still told (the verdict fails on the replica).
		if mv := row(rep, "move", "all"); strings.Contains(mv.Detail, "no step is safe") {
			t.Errorf("move: %+v", mv)
		}
	})
	t.Run("a current node under another address in the next set", func(t *testing.T) {
		fresh := redistest.Start(t, 2)
		settle(t, fresh...)
		next := nodesFlag(fresh...) + ",redis://localhost:" + strconv.Itoa(cur[0].Port())
		rep, r := doctor(t, "--nodes", nodesFlag(cur...), "--next-nodes", next)
		if c := row(rep, "distinct", "current 0, next 2"); r.code != exitError || c.Verdict != verdictFail || !strings.Contains(c.Detail, "same redis-server process under two addresses") {
			t.Errorf("one server in both sets under two addresses: %+v: %v", c, r)
		}
	})
	t.Run("healthy sets sharing nodes", func(t *testing.T) {
		extra := redistest.Start(t, 1)
		settle(t, extra...)
		rep, r := doctor(t, "--nodes", nodesFlag(cur...), "--next-nodes", nodesFlag(cur[1], cur[2], extra[0]))
		if r.code == exitError || rep.Verdict == verdictFail {
			t.Errorf("healthy move: %v", r)
		}
		if c := row(rep, "distinct", "across sets"); c.Verdict != verdictOK {
			t.Errorf("across sets: %+v", c)
		}
		if c := row(rep, "eviction", "next 2 "); c.Verdict != verdictOK {
			t.Errorf("next set not checked: %+v", c)
		}
	})
}
