package redlock

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// A node's identity, and the check that no two nodes are one. One server
// given twice under two addresses (127.0.0.1 and localhost, a host name
// and its IP address, two DNS names), a replica given beside its master,
// or a copy of a node's data set would cast two votes, which New cannot
// see since it does no I/O. At a Client's first contact with its nodes
// (before the first round that can make it a holder: engine.admit; on one
// set of standalone nodes, with its first acquire, below) it reads each
// node's identity and its process's run_id (id.lua; for a
// Redis Cluster the identity of the slot of {PREFIX} and every master's
// run_id), and refuses the node set when two nodes share either: that
// obtain and every later one fail with an error wrapping ErrInvalid that
// names both nodes.
//
// The identity (docs/reconfiguration.md, "A node's identity") is a random
// value kept in the node's data set ({PREFIX}:id), written by the first
// Client to ask: a restart with the data keeps it, a failover keeps it (a
// replica has it), a restart without the data gives the node a new one.
// It names the node in the fingerprints of the configuration records
// (nodesets.go), so that one set has one fingerprint however its
// addresses are written (issue 44's finding E). Until a node answers, its
// address stands in for it there.
//
// Every script that can give a vote (an acquire, a refresh, a claim, a
// record round) is sent with the identity the Client learned for its node
// (script.Guard.Node), and refuses to vote on a server of another identity
// before it writes anything (epoch.lua's node_is): an address that reaches
// another server than at the first contact (a DNS name or a proxy pointed
// elsewhere) can never cast a vote of another node of the set. The refusal
// makes the Client identify the node again: an acquire at once, sent once
// more on a new identity (identities.now), any other request before the
// Client's next round (identities.refused): a new identity (a node
// restarted without its data) then names the node, and one that another node holds refuses the node
// set as at the first contact. On a Redis Cluster the identity is in
// another slot than a lock's keys, and is checked at the first contact
// only; so on a go-redis Ring (driver.Info.Spread), where it is on one
// shard and a lock's keys may be on another (every lock there was
// refused as on a server with no identity).
//
// A node is identified once per Client. The first contact waits for every
// node's answer, up to the node timeout, but for a silent node only a
// little once a quorum answered (firstContact). A node that did not answer
// is learned when its request ends. After that, an acquire sent to a
// standalone or Sentinel-managed node not yet identified reads its
// identity itself, after its script in the same pipeline (acquireOn,
// script.Call.AcquireIdentified), and its vote counts only once the
// identity is compared with the other nodes' (learnRead); other requests
// ask such a node again, without waiting, at most once per identityRetry
// (or node timeout), and a Redis Cluster or Ring node is asked so before a
// later acquire round too. Until a node answers, a claim's, a refresh's
// or a check's vote there counts as any node's.
//
// On one set of standalone or Sentinel-managed nodes (fold), there is no
// first contact before an acquire (issue 50: a Client's first obtain then
// costs one round; with configuration records its first record rides on
// it, recorder.foldFirst): its acquires read every node's identity as
// above, and the acquire that reads a node's
// identity for the first time waits after its decision, as the first
// contact does, for the nodes still to answer (awaitReads). A round that
// finds one server twice is given back and fails with the set's
// ErrInvalid (engine.acquire). docs/reconfiguration.md, "A node's
// identity", has the argument.

// identityRetry is the least time between two identity requests to a node
// that has not answered.
const identityRetry = time.Second

// errSameServer marks the error of a node set with one server twice: the
// obtain loop returns it at once.
var errSameServer = errors.New("redlock: one redis-server process given as two nodes")

type sameServerError struct{ msg string }

func (e *sameServerError) Error() string { return e.msg }
func (e *sameServerError) Is(target error) bool {
	return target == ErrInvalid || target == errSameServer
}

// identities is the part of the engine that knows what each node is: the
// identities and run_ids learned, and each node's guard setting, which
// carries its identity to every vote.
type identities struct {
	w    *wiring
	sets *nodeSets // named by the identities known (nodesets.go)
	// guards are each node's guard setting, encoded once, and again when
	// the node is identified.
	guards []atomic.Pointer[script.Guard]

	// done is set once every node is identified, or two are one server
	// (err): the check costs one atomic load from then on.
	done atomic.Bool
	// bad is set with err: a round that read identities (acquireOn) asks
	// it after the round, for one atomic load.
	bad atomic.Bool
	// fold is set when an acquire reads the identity of each node not yet
	// identified itself (foldable): no first contact precedes it.
	fold bool
	mu   sync.Mutex
	// ids holds each node's servers' run_ids once it answered (an empty
	// slice when INFO gave none), and node each node's identity; nil
	// before the first check.
	ids  [][]string
	node []string
	// asked is when each node was last sent a request (zero: never).
	asked []time.Time
	// first is closed when the first contact is over; nil before it (with
	// fold, until a claim or a check makes one).
	first chan struct{}
	err   error
}

func (s *identities) result() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// guard is node i's guard setting: the identity it was learned with, if
// any (script.Guard.Node).
func (s *identities) guard(i int) script.Guard { return *s.guards[i].Load() }

// newGuard is the epoch guard's first setting for node i, before its
// identity is known (guard), with epochKey the epoch record of a
// standalone node.
func (s *identities) newGuard(i int, epochKey string) script.Guard {
	mode := byte('1')
	switch s.w.cfg.guard {
	case GuardTrustPersistence:
		mode = 'p'
	case GuardOff:
		mode = '0'
	}
	g := script.NewGuard(mode, s.w.cfg.maxTTL, s.w.nodes[i].Cluster)
	if !s.w.nodes[i].Cluster {
		g = g.WithEpoch(epochKey) // the acquires' Keys.Epoch (lockKeys.on)
	}
	return g
}

var runIDPattern = regexp.MustCompile(`(?m)^run_id:([0-9a-fA-F]+)\r?$`)

// foldable reports whether the acquires can read the nodes' identities
// themselves, in their own pipelines (engine.acquireOn), with no first
// contact before them: on one set of nodes (with configuration records,
// the first acquire then carries the first record too: recorder.foldFirst;
// a joint Client names two sets by the identities before its first
// acquire), two nodes or more, neither a Redis Cluster nor Spread (whose
// identity is not read by one script on the server of a lock's keys).
func (s *identities) foldable() bool {
	if len(s.w.nodes) < 2 || (!s.w.cfg.noRecords && s.sets.joint()) {
		return false
	}
	for _, n := range s.w.nodes {
		if n.Cluster || n.Spread {
			return false
		}
	}
	return true
}

// check is asked before each acquire round on the nodes, and before a
// claim or a sequencer's check: it identifies the nodes not yet
// identified, and returns the error of a node set with one server twice.
// With folds (an acquire, whose requests read the identity of a node not
// yet identified: acquireOn) a Client that folds makes no first contact,
// and no node that an acquire identifies is asked apart. The caller holds
// the engine's life for reading: the requests run on goroutines of s.w.bg.
func (s *identities) check(ctx context.Context, timeout time.Duration, folds bool) error {
	if s.done.Load() {
		return s.result()
	}
	if len(s.w.nodes) < 2 && s.w.cfg.noRecords {
		// Nothing to compare, and no fingerprint to name.
		s.done.Store(true)
		return nil
	}
	s.mu.Lock()
	if s.ids == nil {
		s.ids = make([][]string, len(s.w.nodes))
		s.node = make([]string, len(s.w.nodes))
		s.asked = make([]time.Time, len(s.w.nodes))
	}
	if folds && s.fold {
		// The acquires read each node's identity (acquireOn). A claim or
		// a check before any still makes the first contact.
		err := s.err
		s.mu.Unlock()
		return err
	}
	contact := s.first == nil
	if contact {
		s.first = make(chan struct{})
	}
	first := s.first
	var ask []int
	select {
	case <-first:
		ask = s.unidentified(timeout, folds)
	default:
		if contact {
			for i := range s.w.nodes {
				ask = append(ask, i)
				s.asked[i] = s.w.cfg.now()
			}
		}
	}
	s.mu.Unlock()
	if !contact {
		// Another obtain makes the first contact: wait for it.
		select {
		case <-first:
		case <-ctx.Done():
			return ctxErr(ctx)
		}
	}
	ended := s.identify(ctx, ask, timeout)
	if contact {
		// The first contact waits for every node's answer, but not for
		// a silent node once a quorum of them answered: then at most
		// twice the slowest answer so far, and 10 ms, more (one server
		// under two addresses answers both at about the same time).
		// The rest are learned when they answer. With configuration
		// records it waits for every node up to the node timeout: a
		// node not identified makes the records' reading conservative
		// (joint.Sets.Known), which refuses to lock beside a move.
		firstContact(ctx, ended, len(ask), timeout, !s.w.cfg.noRecords)
		close(first)
	}
	return s.result()
}

// unidentified are the nodes not identified (after the first contact),
// each asked at most once per identityRetry (or node timeout): they are
// marked asked now. With folds, not those the caller's acquire identifies
// (readsIdentity). The caller holds s.mu.
func (s *identities) unidentified(timeout time.Duration, folds bool) []int {
	var ask []int
	now := s.w.cfg.now()
	for i, n := range s.w.nodes {
		if folds && !n.Cluster && !n.Spread {
			continue
		}
		if s.ids[i] == nil && now.Sub(s.asked[i]) >= max(identityRetry, timeout) {
			ask = append(ask, i)
			s.asked[i] = now
		}
	}
	return ask
}

// identify reads the identities of the nodes ask, on goroutines of s.w.bg
// (the caller holds the engine's life for reading, or runs on s.w.bg), and
// learns them; each request reports its round trip on the channel when it
// ends.
func (s *identities) identify(ctx context.Context, ask []int, timeout time.Duration) <-chan time.Duration {
	ended := make(chan time.Duration, len(ask))
	for _, i := range ask {
		s.w.bg.Go(func() {
			t0 := s.w.cfg.now()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			id, runs, err := readIdentity(rctx, s.w.nodes[i], keys.Layout{Prefix: s.w.cfg.prefix}.NodeID())
			cancel()
			s.mu.Lock()
			s.learn(i, id, runs, err)
			s.mu.Unlock()
			ended <- s.w.cfg.now().Sub(t0)
		})
	}
	return ended
}

// again asks, without waiting, the nodes a refusal marked unidentified
// (refused) since the first contact (with fold, since the first check),
// and those not identified yet: a refresh calls it, so that a Client
// that only keeps its locks learns a node's new identity too. The caller
// holds the engine's life for reading, or runs on s.w.bg.
func (s *identities) again(timeout time.Duration) {
	if s.done.Load() {
		return
	}
	s.mu.Lock()
	var ask []int
	if s.ids != nil && s.err == nil {
		// Not while a first contact runs; with fold, none may have run.
		over := s.first == nil
		if !over {
			select {
			case <-s.first:
				over = true
			default:
			}
		}
		if over {
			ask = s.unidentified(timeout, false)
		}
	}
	s.mu.Unlock()
	s.identify(context.Background(), ask, timeout)
}

// firstContact waits for the first contact's n requests, which report
// their round trips on ended: until all ended, or (unless every) a quorum
// of them ended and the grace after it passed, or the node timeout, or
// ctx ends.
func firstContact(ctx context.Context, ended <-chan time.Duration, n int, timeout time.Duration, every bool) {
	deadline := time.NewTimer(timeout + 10*time.Millisecond)
	defer deadline.Stop()
	var grace <-chan time.Time
	slowest := time.Duration(0)
	for got := 0; got < n; {
		select {
		case rtt := <-ended:
			got++
			slowest = max(slowest, rtt)
			if !every && got >= n/2+1 && got < n {
				g := time.NewTimer(2*slowest + 10*time.Millisecond)
				defer g.Stop()
				grace = g.C
			}
		case <-grace:
			return
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// learn records node i's answer, its identity id and its servers'
// run_ids, compares them with the other nodes', and names the Client's
// node sets by the identities known (nodesets.go). The caller holds s.mu.
func (s *identities) learn(i int, id string, runs []string, err error) {
	if err != nil || s.err != nil {
		return
	}
	if runs == nil {
		runs = []string{}
	}
	s.ids[i], s.node[i] = runs, id
	for j, other := range s.ids {
		if j == i || other == nil {
			continue
		}
		a, b := min(i, j), max(i, j)
		for _, run := range runs {
			if slices.Contains(other, run) {
				s.err = &sameServerError{msg: fmt.Sprintf("%v: nodes %d (%s) and %d (%s) are one redis-server process (run_id %s): one server would cast two votes; give each server once",
					ErrInvalid, a, s.w.nodes[a].Addr, b, s.w.nodes[b].Addr, run)}
				s.done.Store(true)
				s.bad.Store(true)
				return
			}
		}
		if id != "" && s.node[j] == id {
			s.err = &sameServerError{msg: fmt.Sprintf("%v: nodes %d (%s) and %d (%s) hold one node identity (%s, in %s): one is a replica of the other, or a copy of its data set, and the two would cast one node's votes twice; give independent nodes",
				ErrInvalid, a, s.w.nodes[a].Addr, b, s.w.nodes[b].Addr, id, keys.Layout{Prefix: s.w.cfg.prefix}.NodeID())}
			s.done.Store(true)
			s.bad.Store(true)
			return
		}
	}
	if id != "" && !s.w.nodes[i].Cluster && !s.w.nodes[i].Spread {
		g := s.guard(i).ForNode(id)
		s.guards[i].Store(&g)
	}
	addrs := make([]string, len(s.w.nodes))
	for j, n := range s.w.nodes {
		addrs[j] = n.Addr
	}
	s.sets.name(addrs, s.node)
	if !slices.ContainsFunc(s.ids, func(ids []string) bool { return ids == nil }) {
		s.done.Store(true)
	}
}

// readsIdentity reports whether an acquire on node i reads the node's
// identity in its own pipeline (acquireOn, script.Call.AcquireIdentified):
// a node that is neither a Redis Cluster nor Spread, not identified since
// the first contact began (or, with fold, since the first acquire), of a
// node set not refused. So every vote of a node comes with its identity,
// compared with the other nodes' before it counts (learnRead), until the
// node is identified.
func (s *identities) readsIdentity(i int) bool {
	if s.done.Load() || s.w.nodes[i].Cluster || s.w.nodes[i].Spread {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids != nil && s.ids[i] == nil && s.err == nil
}

// learnRead learns node i's identity id, read by an acquire after its
// script on the same connection (readsIdentity), and returns the error
// of a node set with one server twice, this node or any other: the
// acquire's vote then does not count. idErr is the read's own failure
// (an error reply), with which the node stays unidentified and its vote
// counts as any node's (as a node's that did not answer the first
// contact).
func (s *identities) learnRead(i int, id script.Identity, idErr error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if idErr == nil && id.ID != "" && s.ids != nil && s.ids[i] == nil {
		s.learn(i, id.ID, runIDs(id), nil)
	}
	return s.err
}

// firstReads are the nodes (a bit each) that an acquire about to be sent
// reads the identity of for the first time (readsIdentity): marked asked
// now, so that one round only waits for them (awaitReads). The caller
// holds the engine's life for reading.
func (s *identities) firstReads() uint64 {
	if s.done.Load() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || s.err != nil {
		return 0
	}
	var reads uint64
	for i, n := range s.w.nodes {
		if !n.Cluster && !n.Spread && s.ids[i] == nil && s.asked[i].IsZero() {
			reads |= 1 << i
			s.asked[i] = s.w.cfg.now()
		}
	}
	return reads
}

// awaitReads waits, after an acquire's round res that read the identity
// of the nodes reads for the first time (firstReads), for those still
// pending when it was decided: until its requests ended, or twice the
// slowest answer and 10 ms more passed, or ctx ended (the first contact's
// grace, firstContact: one server under two addresses answers both at
// about the same time). So a node set with one server twice is refused by
// the acquire that first reads it, as by a first contact, and a silent
// node costs one acquire a little wait, once. It returns s.failed().
func awaitReads[T any](ctx context.Context, s *identities, reads uint64, res quorum.Result[T]) error {
	if reads&res.Pending != 0 {
		slowest := time.Duration(0)
		for _, r := range res.Replies {
			slowest = max(slowest, r.Latency)
		}
		grace := time.NewTimer(2*slowest + 10*time.Millisecond)
		defer grace.Stop()
		select {
		case <-res.Done:
		case <-grace.C:
		case <-ctx.Done():
		}
	}
	return s.failed()
}

// failed is the error of a node set refused as one server twice, for a
// round that may have read identities (acquireOn): nil, for one atomic
// load, while it is not.
func (s *identities) failed() error {
	if !s.bad.Load() {
		return nil
	}
	return s.result()
}

// now identifies node i again at once, for an acquire that the
// node refused as another node's (script.IsOtherNode), within the
// request's ctx: it returns the node's guard with the identity learned,
// and whether the acquire may be sent again with it (a new identity that
// no other node of the set holds). So a node restarted without its data,
// when the guard lets it vote at once, costs its next acquire one more
// request, not a failed attempt.
func (s *identities) now(ctx context.Context, i int) (script.Guard, bool) {
	if s.w.nodes[i].Cluster || s.w.nodes[i].Spread {
		return script.Guard{}, false
	}
	id, runs, err := readIdentity(ctx, s.w.nodes[i], keys.Layout{Prefix: s.w.cfg.prefix}.NodeID())
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.ids == nil || s.err != nil || id == s.node[i] {
		return script.Guard{}, false
	}
	s.ids[i], s.asked[i] = nil, s.w.cfg.now()
	s.done.Store(false)
	s.learn(i, id, runs, nil)
	if s.err != nil || s.ids[i] == nil {
		return script.Guard{}, false
	}
	return s.guard(i), true
}

// refused is node i's quorum.Node.OnErrorReply: a script that refused to
// vote because the server is not the node identified (script.IsOtherNode)
// makes check ask the node again, at once. Until it answers, the node's
// guard keeps the identity it had, and the node gives no vote.
func (s *identities) refused(i int) func(error) {
	return func(err error) {
		if !script.IsOtherNode(err) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ids == nil || s.ids[i] == nil || s.err != nil {
			return
		}
		s.ids[i] = nil
		s.asked[i] = time.Time{}
		s.done.Store(false)
	}
}

// readIdentity reads a node's identity at key (id.lua, which writes one
// when it has none), and the run_id of its server (a Sentinel-managed
// node's master), or of each master of a Redis Cluster. An error reply is
// an answer about the node, not the identity: it stays unknown, and is
// asked again later.
func readIdentity(ctx context.Context, n *quorum.Node, key string) (string, []string, error) {
	ident, err := script.Identify(ctx, n.Conn, key)
	if err != nil {
		return "", nil, err
	}
	if !n.Cluster {
		return ident.ID, runIDs(ident), nil
	}
	masters, err := n.Conn.Masters(ctx)
	if err != nil {
		return "", nil, err
	}
	runs := []string{}
	for _, m := range masters {
		v, err := m.Do(ctx, "INFO", "server")
		if err != nil {
			if driver.IsReply(err) {
				continue
			}
			return "", nil, err
		}
		str, _ := v.(string)
		if m := runIDPattern.FindStringSubmatch(str); m != nil {
			runs = append(runs, m[1])
		}
	}
	return ident.ID, runs, nil
}

// runIDs are the run_ids a standalone node's identity read gives: its
// process's, or none when INFO was refused.
func runIDs(ident script.Identity) []string {
	if ident.RunID == "" {
		return []string{}
	}
	return []string{ident.RunID}
}
