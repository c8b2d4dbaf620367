package quorum

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Reply is one node's answer in a round.
type Reply[T any] struct {
	Val T
	// Err is the node's error, or ErrTimeout when it had not answered by
	// the time the round was decided.
	Err error
	// Yes is true when the node agreed.
	Yes bool
	// Latency is how long the node took to answer (0 when it had not
	// answered by the decision).
	Latency time.Duration
}

// Round is one operation sent to every node.
type Round[T any] struct {
	Nodes []*Node
	// Quorum decides which agreeing nodes win the round: Count(q), or a
	// joint configuration's Joint.
	Quorum Rule
	// Timeout bounds each node's request.
	Timeout time.Duration
	// Wait says whether the round returns as soon as its outcome is known
	// (the zero value) or waits for more replies.
	Wait Wait
	// Call performs the operation on one node.
	Call func(ctx context.Context, n *Node) (T, error)
	// Agree reports whether a reply without error counts toward the quorum.
	Agree func(T) bool
	// ValidUntil, when set, is the end of what the round grants (a lock's
	// validity): the round is won only if a quorum agreed before it, on
	// Now's clock.
	ValidUntil time.Time
	// Settle, when set, is called exactly once per admitted node after the
	// round is decided, with that node's real reply (early or late) and
	// whether the round was won. When the round is lost, Run waits for the
	// Settle of every node that agreed before the decision (so a failed
	// acquire has cleaned up its certain footprints when Run returns);
	// every other Settle (errors, late replies, won rounds) may run after
	// Run returns, on a goroutine registered with Run's WaitGroup.
	//
	// late is true when the reply came after the round was decided: an
	// operation whose reply came before it took effect on its node before
	// Run returned, whenever its Settle runs.
	Settle func(n *Node, v T, err error, won, late bool)
	// Enough, when set, is asked once a quorum agreed with replies still
	// outstanding: the round waits for more (up to every reply, or the
	// timeout) until it returns true. For a decision that needs more than
	// a count of yes-votes (the lock family's token, which a quorum of the
	// votes must agree on).
	Enough func(replies []Reply[T]) bool
	// Force sends the request even to a node that is skipped or at its
	// in-flight bound: for the clean-up of requests that were admitted.
	Force bool
	// Now is the clock used for the breaker; nil means time.Now.
	Now func() time.Time
}

// Wait says when a round returns with replies still outstanding.
type Wait int

const (
	// Early decides as soon as the outcome is known: a quorum agreed, or
	// can no longer agree.
	Early Wait = iota
	// WaitOnLoss returns as soon as a quorum agreed, but waits for every
	// reply (or the timeout) when the round cannot be won, so that a
	// failure reports every node's reason.
	WaitOnLoss
	// WaitAll waits for every reply (or the timeout).
	WaitAll
)

// Result is the outcome of a round.
type Result[T any] struct {
	Replies []Reply[T]
	Agreed  int
	// Yes has bit i set when node i agreed (Replies[i].Yes).
	Yes uint64
	Won bool
	// Pending has bit i set when node i was sent the request and had not
	// answered when the round was decided: its answer comes later, to
	// Settle.
	Pending uint64
	// Done is closed once every admitted node has answered (or failed) and
	// its Settle has returned.
	Done <-chan struct{}
}

// closed is a Done channel for rounds that finished inside Run.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Run sends the operation to every node (at most 64) in parallel and returns once the
// outcome is decided: when the agreeing nodes meet Quorum, when they can no
// longer, when every node has answered, when the per-node timeout has
// passed, or when ctx ends. Requests still in flight then keep running on
// goroutines started by wg, which the owner of wg must wait for.
//
// ctx's cancellation does not reach the requests: once sent, a request runs
// until its node answers or the per-node timeout passes, so that its outcome
// is known and Settle can clean up exactly. (An aborted request may still
// run on its node after a clean-up sent on another connection.)
//
// A round of one node whose client honours deadlines runs on the caller's
// goroutine; one whose client does not, on one goroutine of wg's.
func (r *Round[T]) Run(ctx context.Context, wg Spawner) Result[T] {
	now := r.clock()
	if len(r.Nodes) == 1 {
		if r.Nodes[0].HonoursDeadline {
			return r.runInline(ctx, wg, now)
		}
		return r.runSolo(ctx, wg, now)
	}

	n := len(r.Nodes)
	if n > 64 {
		panic(fmt.Sprintf("quorum: a round of %d nodes; at most 64", n)) // New refuses more
	}
	res := Result[T]{Replies: make([]Reply[T], n)}
	// What the node goroutines share with Run, in one allocation.
	type msg struct {
		i   int
		val T
		err error
		lat time.Duration
	}
	st := &struct {
		ch      chan msg
		decided chan struct{}
		done    chan struct{}
		won     atomic.Bool
		waitFor uint64 // Settle that Run waits for; written before decided closes
		settled sync.WaitGroup
		active  atomic.Int32 // admitted requests not yet settled
	}{
		ch:      make(chan msg, n),
		decided: make(chan struct{}),
		done:    make(chan struct{}),
	}
	res.Done = st.done
	st.active.Store(1)
	var answered uint64

	// One deadline for the whole round, without a Done channel: a client
	// that honours deadlines sets its socket deadlines from it, and a dial
	// that the node refused reports the refusal (go-redis retries a refused
	// dial until the context is done, and then reports only that). The
	// round's own wait ends at a channel shared with other rounds, closed
	// at the deadline or a little after (roundDeadlines), which costs no
	// timer. The nodes whose client does not honour deadlines share one
	// context with that channel as its Done: one allocation per round,
	// not one per request.
	sent := time.Now()
	values := detach(ctx)
	nodeCtx := withDeadline(values, sent.Add(r.Timeout))
	bucket := roundDeadlines.at(sent, r.Timeout)
	expired := bucket.done
	var doneCtx context.Context // made for the first such node
	// What the requests' goroutines use of r, copied so that r does not
	// escape: a caller's Round stays on its stack.
	call, settle, timeout := r.Call, r.Settle, r.Timeout
	pending := 0
	var waiting uint64 // admitted, not answered
	for i, node := range r.Nodes {
		probe, err := r.admit(node, now)
		if err != nil {
			res.Replies[i].Err = err
			answered |= 1 << i
			continue
		}
		pending++
		waiting |= 1 << i
		st.active.Add(1)
		rctx := nodeCtx
		if !node.HonoursDeadline {
			// Its requests end only at the client's own timeouts: a
			// Done channel at least ends its waits for a pooled
			// connection and between retries.
			if doneCtx == nil {
				doneCtx = &sharedDeadlineCtx{Context: values, deadline: sent.Add(r.Timeout), b: bucket}
			}
			rctx = doneCtx
		}
		wg.Go(func() {
			defer func() {
				if st.active.Add(-1) == 0 {
					close(st.done)
				}
			}()
			sent := time.Now()
			v, err := call(rctx, node)
			lat := time.Since(sent)
			late := false
			select {
			case <-st.decided:
				late = true
			default:
			}
			err = finish(node, probe, err, now, timeout)
			st.ch <- msg{i, v, err, lat}
			if settle != nil {
				<-st.decided
				settle(node, v, err, st.won.Load(), late)
				if st.waitFor&(1<<i) != 0 {
					st.settled.Done()
				}
			}
		})
	}
	// The spawner's own count, held until every request has started.
	if st.active.Add(-1) == 0 {
		close(st.done)
	}

	timedOut := false
wait:
	for pending > 0 && !r.decided(res.Yes, waiting, res.Replies) {
		select {
		case m := <-st.ch:
			pending--
			answered |= 1 << m.i
			waiting &^= 1 << m.i
			yes := m.err == nil && r.Agree(m.val)
			res.Replies[m.i] = Reply[T]{Val: m.val, Err: m.err, Yes: yes, Latency: m.lat}
			if yes {
				res.Agreed++
				res.Yes |= 1 << m.i
			}
		case <-expired:
			timedOut = true
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	for i := range res.Replies {
		if answered&(1<<i) == 0 {
			res.Pending |= 1 << i
			switch {
			case ctx.Err() != nil:
				res.Replies[i].Err = ctx.Err()
			case timedOut:
				res.Replies[i].Err = fmt.Errorf("%w within %v", ErrTimeout, r.Timeout)
			default:
				res.Replies[i].Err = ErrPending
			}
		}
	}
	res.Won = r.won(res.Yes, now)
	st.won.Store(res.Won)
	if !res.Won && r.Settle != nil {
		for i, rep := range res.Replies {
			if rep.Yes {
				st.waitFor |= 1 << i
				st.settled.Add(1)
			}
		}
	}
	close(st.decided)
	st.settled.Wait()
	return res
}

// decided reports whether the round's outcome is known with the replies of
// the nodes of waiting still outstanding.
func (r *Round[T]) decided(yes, waiting uint64, replies []Reply[T]) bool {
	won := r.Quorum.Met(yes) && (r.Enough == nil || r.Enough(replies))
	switch r.Wait {
	case WaitAll:
		return false
	case WaitOnLoss:
		return won
	}
	return won || !r.Quorum.Met(yes|waiting)
}

// clock is r.Now, or time.Now. Run takes it in one assignment: a variable
// assigned twice and captured by the round's goroutines was moved to the
// heap, one allocation per round.
func (r *Round[T]) clock() func() time.Time {
	if r.Now != nil {
		return r.Now
	}
	return time.Now
}

// begin starts the request of a round of one node: it admits the node
// and returns the request's context and when it was sent. rctx is nil when
// nothing is sent (the node was not admitted, or ctx has ended), and res is
// then the round's result.
//
// The context has a Done channel at the deadline, not a bare deadline:
// where the caller waits on the call (runInline), a wait for a pooled
// connection ends only when the context is done (or at go-redis's
// PoolTimeout, seconds later); where it does not (runSolo), the client's
// own timeouts end its reads, and Done its waits for a pooled connection
// and between retries (go-redis's MaxRetries), so that the request's
// goroutine, which Close waits for, ends near the deadline rather than
// retries of ReadTimeout later. The node's shared deadline channels give
// it one, allocated with the round's reply (solo): one allocation for
// both.
func (r *Round[T]) begin(ctx context.Context, now func() time.Time) (res Result[T], rctx context.Context, sent time.Time, probe bool) {
	node := r.Nodes[0]
	s := new(solo[T])
	res = Result[T]{Replies: s.reply[:], Done: closed}
	probe, err := r.admit(node, now)
	if err != nil {
		res.Replies[0].Err = err
		return res, nil, sent, probe
	}
	if err := ctx.Err(); err != nil {
		res.Replies[0].Err = err
		node.done(probe, answered, now())
		return res, nil, sent, probe
	}
	sent = time.Now()
	node.deadlines.fill(&s.ctx, detach(ctx), sent, r.Timeout)
	return res, &s.ctx, sent, probe
}

// solo is what a round of one node allocates: its reply and its request's
// context. The Result's Replies then keep the context, and with it the
// caller's context values, alive: a caller uses a round's Replies and
// drops them (none in the library keeps them, nor a Reply's address).
type solo[T any] struct {
	reply [1]Reply[T]
	ctx   sharedDeadlineCtx
}

func (r *Round[T]) runInline(ctx context.Context, wg Spawner, now func() time.Time) Result[T] {
	res, rctx, sent, probe := r.begin(ctx, now)
	if rctx == nil {
		return res
	}
	node := r.Nodes[0]
	v, err := r.Call(rctx, node)
	lat := time.Since(sent)
	err = finish(node, probe, err, now, r.Timeout)
	yes := err == nil && r.Agree(v)
	res.Replies[0] = Reply[T]{Val: v, Err: err, Yes: yes, Latency: lat}
	if yes {
		res.Agreed, res.Yes = 1, 1
	}
	res.Won = r.won(res.Yes, now)
	switch {
	case r.Settle == nil:
	case err != nil:
		done := make(chan struct{})
		res.Done = done
		settle, won := r.Settle, res.Won // not r: it stays with its caller
		wg.Go(func() {
			defer close(done)
			settle(node, v, err, won, false)
		})
	default:
		r.Settle(node, v, err, res.Won, false)
	}
	return res
}

// runSolo is a round of one node whose client does not honour deadlines (a
// go-redis client without ContextTimeoutEnabled, which reads until its own
// ReadTimeout): the request runs on a goroutine of wg's, and the caller
// waits for its reply up to the deadline. It costs the request's
// goroutine hand-off more than runInline (its state and reply channel are
// pooled: soloCall); a reply that comes after the deadline is settled by a
// goroutine started only then.
func (r *Round[T]) runSolo(ctx context.Context, wg Spawner, now func() time.Time) Result[T] {
	res, rctx, sent, probe := r.begin(ctx, now)
	if rctx == nil {
		return res
	}
	node := r.Nodes[0]
	expired := rctx.Done()
	// The request's goroutine and its reply channel come from a pool
	// (soloCall): it goes back only once its reply was received, when
	// the goroutine is done with it.
	sc := getSoloCall[T]()
	sc.call, sc.timeout, sc.ctx, sc.node, sc.probe, sc.now, sc.sent = r.Call, r.Timeout, rctx, node, probe, now, sent
	wg.Go(sc.run)
	var m soloReply[T]
	var err error
	select {
	case m = <-sc.ch:
		sc.release()
	case <-expired:
		err = fmt.Errorf("%w within %v", ErrTimeout, r.Timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		// Undecided: the reply, when it comes, is late.
		res.Replies[0].Err = err
		res.Pending = 1
		done := make(chan struct{})
		res.Done = done
		settle := r.Settle // not r: it stays with its caller
		wg.Go(func() {
			defer close(done)
			m := <-sc.ch
			sc.release()
			if settle != nil {
				settle(node, m.v, m.err, false, true)
			}
		})
		return res
	}
	yes := m.err == nil && r.Agree(m.v)
	res.Replies[0] = Reply[T]{Val: m.v, Err: m.err, Yes: yes, Latency: m.lat}
	if yes {
		res.Agreed, res.Yes = 1, 1
	}
	res.Won = r.won(res.Yes, now)
	if r.Settle != nil {
		r.Settle(node, m.v, m.err, res.Won, false)
	}
	return res
}

// soloCall is the state of runSolo's request: what its goroutine needs,
// the channel it sends its one reply on (unbuffered: the caller, or the
// late reply's goroutine, always receives), and run, the function handed
// to the Spawner, made once per soloCall. soloCalls are pooled, one pool
// per reply type, so that a round costs neither a channel nor a closure.
// A soloCall goes back to its pool (release) only after its reply was
// received: its goroutine reads its fields before it sends and touches
// nothing of it after, so no late send can reach a reused channel.
type soloCall[T any] struct {
	ch  chan soloReply[T]
	run func()

	// Set for one request, cleared by release.
	call    func(ctx context.Context, n *Node) (T, error)
	timeout time.Duration
	ctx     context.Context
	node    *Node
	probe   bool
	now     func() time.Time
	sent    time.Time
}

// soloReply is a soloCall's reply.
type soloReply[T any] struct {
	v   T
	err error
	lat time.Duration
}

// soloPools holds one *sync.Pool of *soloCall[T] per T, keyed by a nil
// *soloCall[T] (an interface of a pointer: no allocation).
var soloPools sync.Map

func soloPool[T any]() *sync.Pool {
	key := any((*soloCall[T])(nil))
	p, ok := soloPools.Load(key)
	if !ok {
		p, _ = soloPools.LoadOrStore(key, &sync.Pool{New: func() any {
			sc := &soloCall[T]{ch: make(chan soloReply[T])}
			sc.run = sc.do
			return sc
		}})
	}
	return p.(*sync.Pool)
}

func getSoloCall[T any]() *soloCall[T] { return soloPool[T]().Get().(*soloCall[T]) }

// do makes the request and sends its reply, its last use of sc.
func (sc *soloCall[T]) do() {
	node, probe, now, sent, timeout := sc.node, sc.probe, sc.now, sc.sent, sc.timeout
	v, err := sc.call(sc.ctx, node)
	lat := time.Since(sent)
	sc.ch <- soloReply[T]{v, finish(node, probe, err, now, timeout), lat}
}

// release returns sc to its pool; only once its reply was received.
func (sc *soloCall[T]) release() {
	sc.call, sc.ctx, sc.node, sc.now = nil, nil, nil, nil
	soloPool[T]().Put(sc)
}

// deadlineCtx is a context with a deadline and no Done channel: a client
// that honours deadlines sets its socket deadlines from Deadline, so a
// request sent under it ends by then; a wait for a pooled connection is not
// cut short by it (the caller's own wait is bounded by the round).
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// withDeadline returns ctx, which cannot be cancelled, with a deadline.
func withDeadline(ctx context.Context, d time.Time) context.Context {
	return &deadlineCtx{Context: ctx, deadline: d}
}

// detach keeps ctx's values but not its cancellation.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx // cannot be cancelled already
	}
	return context.WithoutCancel(ctx)
}

// finish records a finished request in the node's health and turns a node
// timeout into ErrTimeout.
func finish(node *Node, probe bool, err error, now func() time.Time, timeout time.Duration) error {
	o := classify(err)
	node.done(probe, o, now())
	node.observe(err)
	if o == timedOut {
		return fmt.Errorf("%w within %v: %w", ErrTimeout, timeout, err)
	}
	return err
}

func (r *Round[T]) won(yes uint64, now func() time.Time) bool {
	return r.Quorum.Met(yes) && (r.ValidUntil.IsZero() || now().Before(r.ValidUntil))
}

func (r *Round[T]) admit(node *Node, now func() time.Time) (probe bool, err error) {
	if r.Force {
		node.forceAdmit()
		return false, nil
	}
	return node.admit(now())
}
