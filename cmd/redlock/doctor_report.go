package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Verdicts of the whole report beside the checks' own (ok, warn, FAIL):
// a quorum votes but not every node does, or fewer than a quorum vote.
const (
	verdictDegraded = "DEGRADED"
	verdictNoQuorum = "NO QUORUM"
)

// quorumState is how many nodes of one set vote now: answer, and are out
// of the restart guard's recovery (voteTime).
type quorumState struct {
	Set    string `json:"set,omitempty"` // "current" or "next" during a move
	Nodes  int    `json:"nodes"`
	Needed int    `json:"needed"`
	Voting int    `json:"voting"`
	// State is "full" (every node votes), "degraded" (a quorum does, not
	// every node) or "none" (fewer than a quorum).
	State string `json:"state"`
	// From is when a quorum votes (RFC 3339, node time), when the nodes
	// that answered are recovering and will vote by then without an
	// acquire; empty when a quorum votes now or none is in sight.
	From string `json:"quorum_from,omitempty"`
	// NotVoting lists the nodes (by index) that do not vote now.
	NotVoting []int `json:"not_voting"`
	// auth is set when a node refused the credentials, badDB when one has
	// no database of its URL's index.
	auth, badDB bool
}

// tally counts the nodes of a set that vote now.
func tally(cfg doctorConfig, probes []nodeProbe, set string) quorumState {
	q := quorumState{Set: set, Nodes: len(probes), Needed: len(probes)/2 + 1, NotVoting: []int{}}
	var later []int64
	for i, p := range probes {
		if p.err != nil {
			q.NotVoting = append(q.NotVoting, i)
			q.auth = q.auth || authFailed(p.err)
			q.badDB = q.badDB || badDB(p.err)
			continue
		}
		v := nodeVote(cfg, p)
		if v.now {
			q.Voting++
			continue
		}
		q.NotVoting = append(q.NotVoting, i)
		if v.at > 0 {
			later = append(later, v.at)
		}
	}
	switch {
	case q.Voting == q.Nodes:
		q.State = "full"
	case q.Voting >= q.Needed:
		q.State = "degraded"
	default:
		q.State = "none"
		if k := q.Needed - q.Voting; len(later) >= k {
			slices.Sort(later)
			q.From = nodeTime(later[k-1])
		}
	}
	return q
}

// verdictOf is the report's verdict: NO QUORUM when a set has fewer than a
// quorum of voting nodes; DEGRADED when a quorum votes but a node does
// not, and no check failed but for unreachable nodes; FAIL when a check
// failed; else warn or ok.
func verdictOf(checks []check, quorums []quorumState) string {
	for _, q := range quorums {
		if q.State == "none" {
			return verdictNoQuorum
		}
	}
	failed, onlyDown, warned := false, true, false
	for _, c := range checks {
		switch c.Verdict {
		case verdictFail:
			failed = true
			onlyDown = onlyDown && c.Check == "reachable"
		case verdictWarn:
			warned = true
		}
	}
	degraded := false
	for _, q := range quorums {
		degraded = degraded || q.State == "degraded"
	}
	switch {
	case failed && !(onlyDown && degraded):
		return verdictFail
	case degraded:
		return verdictDegraded
	case warned:
		return verdictWarn
	}
	return verdictOK
}

// exitOf is doctor's exit status for a verdict: 2 when a node has no
// database of its URL's index (a configuration error), 69 when no quorum
// votes (no lock can be taken now, as run exits), 77 instead when a node
// refused the credentials, 1 when a check failed or the set is degraded, 0
// otherwise.
func exitOf(verdict string, quorums []quorumState) int {
	for _, q := range quorums {
		if q.badDB {
			return exitUsage // the URL is wrong, as run and inspect exit
		}
	}
	switch verdict {
	case verdictNoQuorum:
		for _, q := range quorums {
			if q.auth {
				return exitAuth
			}
		}
		return exitUnavailable
	case verdictFail, verdictDegraded:
		return exitError
	}
	return exitOK
}

// remedySep separates a check's finding from its remedy in the detail a
// check function returns (withRemedy); the report says each remedy once.
const remedySep = "\x1f"

// withRemedy joins a finding and the remedy that doctor says once for
// every row that needs it.
func withRemedy(detail, remedy string) string { return detail + remedySep + remedy }

// collectRemedies moves the remedies out of the checks' details into the
// report's list, each once, and numbers the checks' references to them.
func (rep *doctorReport) collectRemedies() {
	index := map[string]int{}
	for i := range rep.Checks {
		c := &rep.Checks[i]
		detail, remedy, ok := strings.Cut(c.Detail, remedySep)
		if !ok {
			continue
		}
		n, seen := index[remedy]
		if !seen {
			rep.Remedies = append(rep.Remedies, remedy)
			n = len(rep.Remedies)
			index[remedy] = n
		}
		c.Detail, c.Remedy = detail, n
	}
}

// print writes the report as a table, the remedies, the quorum and the
// verdict.
func (rep *doctorReport) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tNODE\tVERDICT\tDETAIL")
	for _, c := range rep.Checks {
		d := c.Detail
		if c.Remedy > 0 {
			d += fmt.Sprintf(" [remedy %d]", c.Remedy)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Check, c.Node, c.Verdict, d)
	}
	_ = tw.Flush()
	if len(rep.Remedies) > 0 {
		fmt.Fprintln(w, "\nRemedies:")
		for i, r := range rep.Remedies {
			fmt.Fprintf(w, "  [%d] %s\n", i+1, r)
		}
	}
	fmt.Fprintln(w)
	for _, q := range rep.Quorum {
		fmt.Fprintf(w, "quorum: %s\n", q.describe())
	}
	fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
}

// describe says the quorum state in words.
func (q quorumState) describe() string {
	set := ""
	if q.Set != "" {
		set = q.Set + " set: "
	}
	not := ""
	if len(q.NotVoting) > 0 {
		idx := make([]string, len(q.NotVoting))
		for i, n := range q.NotVoting {
			idx[i] = fmt.Sprint(n)
		}
		not = fmt.Sprintf(" (not voting: %s)", nodeList(idx))
	}
	switch q.State {
	case "full":
		return fmt.Sprintf("%s%d of %d nodes vote, %d needed", set, q.Voting, q.Nodes, q.Needed)
	case "degraded":
		return fmt.Sprintf("%s%d of %d nodes vote, %d needed%s: degraded, locks can be taken; %d more failure%s and none can", set, q.Voting, q.Nodes, q.Needed, not, q.Voting-q.Needed+1, plural(q.Voting-q.Needed+1))
	}
	when := "no lock can be taken"
	if q.From != "" {
		when = "no lock can be taken until " + q.From + ", when enough of them end their recovery"
	}
	return fmt.Sprintf("%s%d of %d nodes vote, %d needed%s: no quorum, %s", set, q.Voting, q.Nodes, q.Needed, not, when)
}

// locate fills the JSON's node fields of a set's checks: the set, the
// node's index and address for a row of one node, the pair of a row of
// two.
func locate(checks []check, probes []nodeProbe, set string, label func(int) string) {
	for ci := range checks {
		c := &checks[ci]
		c.Set = set
		for i := range probes {
			if c.Node == label(i) {
				c.Index, c.Address = &i, probes[i].spec.label
				break
			}
		}
	}
}
