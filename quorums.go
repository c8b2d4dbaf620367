package redlock

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The quorums of the engine: each lock's quorum rule (internal/quorum
// decides the rounds with it), and a round's outcome as the public types
// NodeResult and QuorumError.

// rule is the quorum rule of a lock of the spec sp: its quorum of the
// nodes, or in a joint configuration its quorum of each set. Every
// round of a lock decides with it.
func (s *nodeSets) rule(sp *spec) quorum.Rule {
	if !s.joint() {
		return quorum.Count(sp.quorum(bits.OnesCount64(s.cur)))
	}
	a, b := bits.OnesCount64(s.cur), bits.OnesCount64(s.next)
	return quorum.Joint(s.cur, sp.quorum(a), s.next, sp.quorum(b))
}

// nodeResults turns a round's replies into NodeResults. disagree gives the
// reason of a node that answered without error but did not agree.
func nodeResults[T any](e *engine, res quorum.Result[T], disagree func(T) error) []NodeResult {
	out := make([]NodeResult, len(res.Replies))
	for i, r := range res.Replies {
		err := r.Err
		if err == nil && !r.Yes {
			err = disagree(r.Val)
		}
		err = otherNodeError(err)
		out[i] = NodeResult{Node: i, Addr: e.nodes[i].Addr, Err: err, Reason: reason(err), Latency: r.Latency}
	}
	return out
}

// quorumError describes a round that did not win. disagree gives the
// reason of a node that answered without error but did not agree.
func quorumError[T any](e *engine, need quorum.Rule, op string, res quorum.Result[T], sentinel error, disagree func(T) error) *QuorumError {
	qe := &QuorumError{Op: op, Need: need.Need(), Agreed: res.Agreed, detail: ruleDetail(need)}
	if sentinel != nil {
		qe.sentinels = []error{sentinel}
	}
	for i, r := range res.Replies {
		if r.Yes {
			continue
		}
		err := r.Err
		if err == nil {
			err = disagree(r.Val)
		}
		err = otherNodeError(err)
		qe.Nodes = append(qe.Nodes, NodeResult{Node: i, Addr: e.nodes[i].Addr, Err: err, Reason: reason(err), Latency: r.Latency})
	}
	return qe
}

// otherNodeError says what a script's identity refusal (REDLOCK_NODE,
// script.IsOtherNode) means, keeping the reply in the chain.
func otherNodeError(err error) error {
	if !script.IsOtherNode(err) {
		return err
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "REDLOCK_NODE "), " ")
	what := "of node identity " + id
	if id == "-" {
		what = "with no node identity (it lost its data)"
	}
	return fmt.Errorf("the address reached a server %s, not the node identified at the first contact: no vote; the Client identifies the node again (docs/reconfiguration.md, \"A node's identity\"): %w", what, err)
}

// ambiguous reports whether a failed request may still have run on the
// node: anything but an error reply from Redis itself.
func ambiguous(err error) bool {
	return err != nil && !driver.IsReply(err)
}

// newRound is a round of the Client's nodes under rule q, each request
// bounded by timeout, on the Client's clock: the header every round
// shares. Its caller adds the call and what decides it.
func newRound[T any](w *wiring, q quorum.Rule, timeout time.Duration, wait quorum.Wait) quorum.Round[T] {
	return quorum.Round[T]{Nodes: w.nodes, Quorum: q, Timeout: timeout, Wait: wait, Now: w.cfg.now}
}
