package redlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Handing a held lock to another process: a scheduler takes the lock and
// gives the work, with the lock, to a worker, which refreshes and releases
// it (docs/handoff.md).

// errHandedOff is Err of a lock this process handed off.
var errHandedOff = fmt.Errorf("%w: it was handed off (Lock.Handoff)", ErrNotHeld)

// handoffForm is the serialized form of a held lock.
type handoffForm struct {
	Version int    `json:"v"`
	Prefix  string `json:"prefix"`
	Nodes   int    `json:"nodes"`
	Name    string `json:"name"`
	Kind    Kind   `json:"kind"`
	// Secret is the plain lock's value, or the hold's ID: whoever has it
	// holds the lock.
	Secret  string `json:"secret"`
	Mode    string `json:"mode,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Permits int    `json:"permits,omitempty"`
	Token   int64  `json:"token"`
	TTL     int64  `json:"ttl_ms"`
}

// Handoff ends this Lock here without releasing it on the nodes, and
// returns it in a form that another process gives to Client.Resume: its
// name, kind, token and TTL, and its secret. The form is single-use: of
// the Resume calls given it, at most one returns the lock, so a form
// delivered twice (an at-least-once queue) makes one holder. From then on this Lock is not
// held (Err wraps ErrNotHeld), it is not refreshed, and neither Release nor
// the Client's Close touches the nodes for it: the lock is the resuming
// process's, or expires with its TTL. A lock with automatic refresh stops
// being refreshed here, so resume it well within its validity.
//
// The form carries the lock's secret: whoever has it can refresh and
// release the lock. Send it only over an authenticated, confidential
// channel, and never log it.
//
// It returns an error wrapping ErrNotHeld when the lock is no longer held,
// and an error for a lock obtained in degraded mode (its lease lives in a
// lease store) or of several names (hand off each part).
func (l *Lock) Handoff() ([]byte, error) {
	if l == nil {
		return nil, errNilLock
	}
	if l.all != nil {
		return nil, errors.New("redlock: handoff: a lock of several names (Client.All) is handed off part by part (Lock.Parts)")
	}
	if l.backend().degraded() {
		return nil, errors.New("redlock: handoff: a lock obtained in degraded mode lives in a lease store of this process's deployment and cannot be handed off")
	}
	e := l.e
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.check(e.cfg.now()); err != nil {
		return nil, err
	}
	h := l.secret.holdOf()
	form := handoffForm{Version: 1, Prefix: e.cfg.prefix, Nodes: len(e.nodes), Name: l.Name(), Kind: l.sp.label,
		Secret: h.ID, Owner: h.Owner, Permits: h.Permits, Mode: modeOf(&h), Token: l.token, TTL: l.TTL().Milliseconds()}
	data, err := json.Marshal(form)
	if err != nil {
		return nil, fmt.Errorf("redlock: handoff: %w", err)
	}
	l.mu.Lock()
	l.released, l.releaseErr = true, errHandedOff
	l.mu.Unlock()
	l.end(errHandedOff)
	e.reg.remove(l)
	if e.cfg.hook != nil {
		now := e.cfg.now()
		l.emit(&e.cfg, context.Background(), ReleaseEvent{LockInfo: l.info(),
			Held: now.Sub(l.obtainedAt()), Err: errHandedOff, Result: ResultHandedOff, Degraded: l.Degraded()})
	}
	return data, nil
}

// Resume takes over a lock that another process handed off (Lock.Handoff),
// at most once per form: it claims the lock on every node by replacing the
// form's secret with a new one of its own, keeping the expiry, where the
// node holds the secret in the form's kind (the mode, owner and number of
// permits the form says), is not recovering from a restart or failover
// (the restart guard, as for an acquire: a claim counts as a vote) and no
// holder granted after the form's lock can have drawn a fencing token
// (the lock's counter there exists and, raised to the floor of the node's
// epoch as an acquire reads it, is at most the form's token; not checked
// for a permit of a semaphore of more than one), and it needs a quorum of
// such claims. A second
// Resume of the same form (a queue that delivers twice, a retried send)
// then finds no quorum and fails with ErrNotHeld: the form is single-use.
// The returned lock is valid until the time the nodes say the claimed
// lock has left, counted from before the claim was sent (less the drift
// allowance), with the token, TTL and kind the form gave. It trusts
// nothing else of the form: a forged secret, or that of a lock released or
// expired since, is refused. The options are those of an obtain that apply
// to a held lock: WithAutoRefresh, WithRefreshInterval, WithMaxHold.
//
// The Client must be of the same deployment as the one that handed the
// lock off: the same nodes, in the same order, and the same prefix.
//
// It returns an error wrapping ErrInvalid for a form that cannot be read,
// contradicts itself or comes from a Client of another prefix or number of
// nodes; an error wrapping ErrWrongKind (a *QuorumError) when the nodes
// hold the secret in another kind than the form says (a reader's form
// edited to say writer, a permit's with another number of permits); an
// error wrapping ErrNotHeld (a *QuorumError, whose recovering nodes' errors
// match ErrNodeRecovering) when a quorum does not hold
// the lock, holds it for less than a per-node timeout, or the form was
// resumed already, or another holder can have held the name since the
// form's lock (whose tenure ended, even if late refreshes of the handing
// Client wrote it back); ErrClosed after Close, and ctx's error when ctx ends
// first. Like an obtain, it records the Client's configuration on the
// nodes first, and returns an error wrapping ErrConfigConflict while they
// show a Client it must not hold beside (docs/reconfiguration.md), or
// wrapping ErrInvalid when two of its nodes are one server. A failed
// Resume gives back what it claimed: the lock is then nobody's, and
// expires. The caller must Release the returned lock.
func (c *Client) Resume(ctx context.Context, handoff []byte, opts ...ObtainOption) (*Lock, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	e := &c.e
	f, r, err := e.readForm(handoff, opts)
	if err != nil {
		return nil, err
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.reg.isClosed() {
		return nil, ErrClosed
	}
	timeout := e.cfg.nodeTimeoutFor(r.ttl)
	if _, err := e.admit(ctx, timeout, false); err != nil {
		return nil, err
	}
	// The resumed lock has a new secret of its own (newLock): the claim
	// makes it the lock's on the nodes, in place of the form's.
	l := e.newLock(r.keys[0], r.spec, "", r.ttl, timeout)
	// The form's token is the lock's from the start: a failed claim's
	// give-back retires it (a late refresh of the handing Client must not
	// bring the form's lock back where the claim took it).
	l.token = f.Token
	start := e.cfg.now()
	res := e.claim(ctx, l, f, timeout)
	if !res.Won {
		sentinel := ErrNotHeld
		for _, rep := range res.Replies {
			if errors.Is(rep.Err, ErrWrongKind) {
				sentinel = ErrWrongKind
			}
		}
		return nil, quorumError(e, *l.quorum, "resume", res, sentinel, e.disagreeClaim)
	}
	validUntil := claimedUntil(l.quorum, e.cfg.drift, res, start)
	l.obtained(start, validUntil, func(i int) bool { return res.Replies[i].Yes }, res.Pending)
	if !e.cfg.now().Before(validUntil.Add(-timeout)) {
		// Claimed, but with too little left to use: give it back, which
		// the caller never had.
		l.silent = true
		_ = l.Release(context.WithoutCancel(ctx))
		qe := quorumError(e, *l.quorum, "resume", res, ErrNotHeld, e.disagreeClaim)
		qe.Expired = true
		return nil, qe
	}
	e.adopt(l, &r.o, 0) // a resumed lock keeps the form's TTL
	if e.cfg.hook != nil {
		defer l.announce() // even if the hook panics
		e.cfg.emit(ctx, ObtainEvent{LockInfo: l.info(), Elapsed: e.cfg.now().Sub(start),
			TTL: l.ttl, TTLReason: "given", Result: ResultObtained})
	}
	return l, nil
}

// readForm reads and checks a handoff form, before any I/O, and makes the
// request of its lock with the options of Resume.
func (e *engine) readForm(handoff []byte, opts []ObtainOption) (*handoffForm, *request, error) {
	f := new(handoffForm)
	if err := json.Unmarshal(handoff, f); err != nil {
		return nil, nil, invalid("handoff: %v", err)
	}
	switch {
	case f.Version != 1:
		return nil, nil, invalid("handoff: version %d, want 1", f.Version)
	case f.Prefix != e.cfg.prefix:
		return nil, nil, invalid("handoff: a lock of prefix %q, this Client's is %q (WithPrefix)", f.Prefix, e.cfg.prefix)
	case f.Nodes != len(e.nodes):
		return nil, nil, invalid("handoff: a lock of a Client of %d nodes, this one has %d", f.Nodes, len(e.nodes))
	case f.Secret == "":
		return nil, nil, invalid("handoff: no secret")
	}
	sp, err := specOf(f.Kind, f.Owner, f.Permits)
	if err != nil {
		return nil, nil, fmt.Errorf("redlock: handoff: %w", err)
	}
	if f.Mode != "" && f.Mode != sp.mode() {
		return nil, nil, invalid("handoff: mode %q of a %s lock", f.Mode, f.Kind)
	}
	r := &request{spec: &sp}
	r.one[0] = f.Name
	r.names = r.one[:]
	if err := e.prepare(r, time.Duration(f.TTL)*time.Millisecond, opts, false); err != nil {
		return nil, nil, fmt.Errorf("redlock: handoff: %w", err)
	}
	return f, r, nil
}

// claim is Resume's round: on every node, the form's secret replaced with
// the lock's own, where the node holds it in the form's kind, may vote
// (the restart guard) and no later holder can have drawn a token.
func (e *engine) claim(ctx context.Context, l *Lock, f *handoffForm, timeout time.Duration) quorum.Result[script.Claim] {
	hold := l.secret.hold // nil for a plain lock
	fence := l.keys.fence()
	round := newRound[script.Claim](&e.wiring, *l.quorum, timeout, quorum.WaitAll)
	round.Call = func(ctx context.Context, n *quorum.Node) (script.Claim, error) {
		call := script.ClaimCall(l.keys.fenced(e, n.Index, fence), hold, f.Secret, l.secret.id, f.Token, e.ident.guard(n.Index))
		c, err := call.Claim(ctx, n.Conn)
		return c, kindError(err)
	}
	round.Agree = func(c script.Claim) bool { return c.Status == script.Claimed && c.Left > 0 }
	// A failed claim gives back what it took, where the node claimed
	// or may have (no definite answer), as a failed acquire does: the
	// form's secret is gone there, so the lock is nobody's. A won
	// claim's late yes joins the lock, unless its release has begun.
	round.Settle = func(n *quorum.Node, c script.Claim, err error, won, late bool) {
		if !won && (c.Status == script.Claimed || ambiguous(err)) {
			l.releaseNode(n, timeout)
			return
		}
		r := script.NotOwner
		if c.Status == script.Claimed {
			r = script.Extended
		}
		l.settleAcquire(n, r, err, late)
	}
	return round.Run(ctx, e.workers)
}

// claimedUntil is the validity of a won claim sent at start, decided by
// the rule q: the lock is held while a quorum holds it, until the
// quorum-th longest of the nodes' remaining times, counted from start,
// less the drift allowance.
func claimedUntil(q *quorum.Rule, drift float64, res quorum.Result[script.Claim], start time.Time) time.Time {
	lefts := make([]int64, len(res.Replies))
	for i, rep := range res.Replies {
		lefts[i] = int64(rep.Val.Left)
	}
	if v, ok := q.Largest(lefts, res.Yes); ok {
		left := time.Duration(v)
		return start.Add(left - limits.DriftAllowance(left, drift))
	}
	return time.Time{}
}

// errResumedAlready is a node's reason when the form's secret was claimed
// there before: a handoff form resumes once.
var errResumedAlready = fmt.Errorf("%w: this handoff was resumed already (a form resumes at most once)", ErrNotOwner)

// errLaterHolder is a node's reason when it holds the form's secret but
// its fencing counter is missing or, raised to the floor of the node's
// epoch, above the form's token: another holder can have been granted the
// name since the form's lock, whose tenure then ended, or the node
// restarted or failed over since and may have lost its token
// (docs/handoff.md, "The fencing token").
var errLaterHolder = fmt.Errorf("%w: the lock's fencing counter is missing or holds a later holder's token, above the form's (or the node restarted or failed over since the form's token was issued)", ErrNotOwner)

// disagreeClaim is the per-node reason of a claim's no.
func (e *engine) disagreeClaim(c script.Claim) error {
	switch c.Status {
	case script.ClaimRecovering:
		return recoveringError(c.Left, e.cfg.maxTTL)
	case script.AlreadyClaimed:
		return errResumedAlready
	case script.Superseded:
		return errLaterHolder
	}
	return ErrNotOwner
}
