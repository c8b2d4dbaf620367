package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Sequencers and their check (docs/fencing.md, "Sequencers"): a lock's
// token bound to its name and kind, and the question a resource asks the
// nodes about it, as Chubby's sequencers and CheckSequencer.

// Check asks the nodes whether s is current, as Chubby's CheckSequencer
// does: fence.Current when the lock is held on a quorum of the nodes in
// s's kind and its latest token there is s's (no later token was issued),
// fence.Superseded when enough nodes say the lock is not held there, is
// held in another kind, or has another latest token, that no quorum can
// say Current, and fence.Unknown otherwise, with a *QuorumError that gives
// each node's reason (down, timed out, recovering: ErrNodeRecovering).
// It changes nothing of the lock: it reads the lock's key and fencing
// counter on every node, after the node's restart guard, so that a node
// that restarted or was promoted, which may have forgotten later tokens,
// vouches for nothing until its recovery ends. The quorum is a majority of
// the nodes, of each set in a joint configuration (WithNextNodes), for
// every kind. The answer held while Check ran; a resource that acts on it
// keeps its fence too, which orders the holders that passed a check.
//
// What current means for each kind (docs/fencing.md, "Checking a
// sequencer"): for a plain lock and an exclusive hold of the lock family
// (a writer's or a reentrant owner's, whose re-entries keep its token),
// that the holder is the lock's latest; for a reader and for a semaphore's
// permit, that no hold of the name, reader or permit, was granted after it
// (a later one supersedes it for Check, though it may still hold its own).
// A lock held longer than the fencing counter's expiry (an hour, or ten
// times WithMaxTTL), whose token the nodes no longer keep, is Unknown.
//
// Check needs a sequencer of this deployment: the same nodes and prefix as
// the Client that obtained the lock. It returns an error wrapping
// ErrInvalid for a bare token (no name), token 0 (a lock of several names:
// check its Parts), a negative token (the degraded mode's, which no node
// issued), an unknown kind, a nil ctx, or a node set with one server
// twice; ErrClosed after Close; ctx's error joined when ctx ends first.
func (c *Client) Check(ctx context.Context, s fence.Sequencer) (fence.Status, error) {
	if ctx == nil {
		return fence.Unknown, errNilContext
	}
	e := &c.e
	key, mode, err := e.checkable(s)
	if err != nil {
		return fence.Unknown, err
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.reg.isClosed() {
		return fence.Unknown, ErrClosed
	}
	timeout := e.cfg.nodeTimeout
	if timeout <= 0 {
		timeout = limits.NodeTimeout(e.cfg.maxTTL)
	}
	if err := e.ident.check(ctx, timeout, false); err != nil {
		return fence.Unknown, err
	}
	rule := e.sets.rule(&plainSpec)
	res := e.checkRound(ctx, key, mode, s.Token, rule, timeout)
	return e.standing(ctx, rule, res)
}

// checkable returns the key of s's lock and the mode checkseq.lua takes
// for its kind, or why Check cannot ask about s.
func (e *engine) checkable(s fence.Sequencer) (string, byte, error) {
	switch {
	case s.Token == 0:
		return "", 0, invalid("check: token 0, which no lock is issued: a lock of several names (Client.All) has 0 as its own token; check each of its Lock.Parts()")
	case s.Lock == "":
		return "", 0, invalid("check: a bare token (%d) names no lock: pass a Lock.Sequencer", s.Token)
	case s.Token < 0:
		return "", 0, invalid("check: token %d of lock %q is of the degraded mode (WithDegradedMode), from a lease store: no node issued it", s.Token, s.Lock)
	}
	var mode byte
	switch Kind(s.Kind) {
	case KindPlain:
		mode = 'p'
	case KindReentrant, KindWrite:
		mode = keys.ModeWrite
	case KindRead:
		mode = keys.ModeRead
	case KindPermit:
		mode = keys.ModePermit
	default:
		return "", 0, invalid("check: sequencer of lock %q: unknown kind %q", s.Lock, s.Kind)
	}
	key, err := e.layout.redisKey(s.Lock)
	return key, mode, err
}

// checkRound reads the lock of key on every node (checkseq.lua): it is won
// when the nodes that say Current make a quorum of rule; when it cannot
// be, it waits for every node's answer, up to timeout, so that standing
// tells Superseded from Unknown on every answer.
func (e *engine) checkRound(ctx context.Context, key string, mode byte, token int64, rule quorum.Rule, timeout time.Duration) quorum.Result[script.Seen] {
	k := e.layout.keysOf(key)
	fence := k.fence()
	round := newRound[script.Seen](&e.wiring, rule, timeout, quorum.WaitOnLoss)
	round.Call = func(ctx context.Context, n *quorum.Node) (script.Seen, error) {
		call := script.CheckSeqCall(k.fenced(e, n.Index, fence), mode, token, e.ident.guard(n.Index))
		return call.CheckSeq(ctx, n.Conn)
	}
	round.Agree = func(s script.Seen) bool { return s.Standing == script.Current }
	return round.Run(ctx, e.workers)
}

// standing decides Check's answer from its round: Current when a quorum
// said so; Superseded when the nodes that did not say NotCurrent (those
// that said Current, those recovering or that no longer know the token,
// and those that did not answer) make no quorum, so that no answer still
// out could make one; Unknown otherwise.
func (e *engine) standing(ctx context.Context, rule quorum.Rule, res quorum.Result[script.Seen]) (fence.Status, error) {
	if res.Won {
		return fence.Current, nil
	}
	var open uint64
	for i, r := range res.Replies {
		if r.Err != nil || r.Val.Standing != script.NotCurrent {
			open |= 1 << i
		}
	}
	if !rule.Met(open) {
		return fence.Superseded, nil
	}
	qe := quorumError(e, rule, "check", res, nil, e.disagreeCheck)
	if ctx.Err() != nil {
		return fence.Unknown, errors.Join(qe, ctxErr(ctx))
	}
	return fence.Unknown, qe
}

// The per-node reasons of a check that is not Current.
var (
	errCheckNotHeld    = fmt.Errorf("%w: the lock is not held on the node", ErrNotOwner)
	errCheckOtherKind  = fmt.Errorf("%w: the lock is held on the node in another kind than the sequencer's", ErrWrongKind)
	errCheckOtherToken = fmt.Errorf("%w: the lock's latest token on the node is another than the sequencer's", ErrNotOwner)
	errCheckForgotten  = errors.New("redlock: the lock is held on the node, which no longer knows its token: its fencing counter expired (held longer than its expiry) or predates the node's epoch (a restart or failover since): it vouches for nothing")
)

// disagreeCheck is a node's reason when it did not say Current.
func (e *engine) disagreeCheck(s script.Seen) error {
	switch s.Standing {
	case script.SeenRecovering:
		return recoveringError(s.Left, e.cfg.maxTTL)
	case script.Forgotten:
		return errCheckForgotten
	}
	switch s.Why {
	case script.WhyOtherKind:
		return errCheckOtherKind
	case script.WhyOtherToken:
		return errCheckOtherToken
	}
	return errCheckNotHeld
}
