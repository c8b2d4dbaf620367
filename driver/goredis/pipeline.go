package goredis

// Auto-pipelining (WithAutoPipelining): the requests of concurrent
// goroutines to one node leave in one write, and their replies come back
// in one read, through go-redis's own pipeline (redis.Pipeliner), as
// rueidis does for its clients.
//
// The decision follows rueidis's: a request alone on its node (none other
// of this Node in flight there) goes straight out on go-redis's Do, with
// no added latency and no allocation. A request that finds others in
// flight joins a queue, which one goroutine of the node's (the flusher,
// started when the queue fills and gone when it is empty) sends as one
// pipeline; the requests that arrive while that pipeline is out make the
// next one. So the batch grows with the load, and a lone request never
// waits for one.
//
// Deadlines are kept per request: a queued request returns at its own
// deadline (or when its context is done) whatever its batch does, and a
// request whose deadline passed before its batch left is not sent. A
// batch is sent with the latest deadline of its requests, so that with
// ContextTimeoutEnabled a frozen node holds it no longer than that, and
// its retries end then. The node's requests in flight, queued or in a
// batch, are the ones the caller (redlock's WithMaxInFlight) admitted.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds the requests of one pipeline; more wait for the next.
const maxBatch = 512

// pipeliner is the auto-pipelining of one Node's requests.
type pipeliner struct {
	c        *redis.Client
	inflight atomic.Int64 // requests in Do: straight out, queued or in a batch

	// What went out as pipelines: their count and their requests.
	batches, batched atomic.Int64

	mu      sync.Mutex
	queue   []*request
	running bool // the flusher runs
}

// request is one queued Do. state says who owns its result: the flusher
// writes val and err, then moves it from waiting to answered and signals
// done; a caller that stops waiting moves it from waiting to abandoned, and
// the flusher then drops it.
type request struct {
	ctx   context.Context
	args  []any
	val   any
	err   error
	state atomic.Int32
	done  chan struct{} // one signal per use
	timer *time.Timer
}

const (
	waiting int32 = iota
	answered
	abandoned
)

var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newPipeliner(c *redis.Client) *pipeliner { return &pipeliner{c: c} }

// do sends one request: straight out when it is alone, else in the next
// batch.
func (p *pipeliner) do(ctx context.Context, args []any) (any, error) {
	if p.inflight.Add(1) == 1 {
		defer p.inflight.Add(-1)
		return p.c.Do(ctx, args...).Result()
	}
	defer p.inflight.Add(-1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := requests.Get().(*request)
	r.ctx, r.args = ctx, args
	r.state.Store(waiting)
	p.enqueue(r)

	// Wait for the reply, the context, or the deadline: a context with a
	// deadline may have no Done channel (the client is trusted to set its
	// socket deadline from it), so the deadline has a timer of its own.
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); ok {
		if r.timer == nil {
			r.timer = time.NewTimer(time.Until(d))
		} else {
			r.timer.Reset(time.Until(d))
		}
		expired = r.timer.C
	}
	var err error
	select {
	case <-r.done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	if err != nil && r.state.CompareAndSwap(waiting, abandoned) {
		// The flusher drops it, or drops its reply: never reused.
		if r.timer != nil {
			r.timer.Stop()
		}
		return nil, err
	}
	if err != nil {
		<-r.done // answered meanwhile: the signal is on its way
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	v, rerr := r.val, r.err
	r.ctx, r.args, r.val, r.err = nil, nil, nil, nil
	requests.Put(r)
	return v, rerr
}

// enqueue adds r to the next batch, and starts the flusher unless it
// runs.
func (p *pipeliner) enqueue(r *request) {
	p.mu.Lock()
	p.queue = append(p.queue, r)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		go p.flush()
	}
}

// flush sends the queue as pipelines, one at a time, until it is empty.
func (p *pipeliner) flush() {
	var batch []*request
	for {
		p.mu.Lock()
		n := min(len(p.queue), maxBatch)
		if n == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		batch = append(batch[:0], p.queue[:n]...)
		rest := copy(p.queue, p.queue[n:])
		clear(p.queue[rest:])
		p.queue = p.queue[:rest]
		p.mu.Unlock()
		p.send(batch)
		clear(batch)
	}
}

// send runs one batch as a pipeline and hands each request its reply.
func (p *pipeliner) send(batch []*request) {
	now := time.Now()
	var (
		latest  time.Time
		forever bool
		values  context.Context
		live    = batch[:0]
	)
	for _, r := range batch {
		if r.state.Load() != waiting {
			continue // its caller stopped waiting: not sent
		}
		d, ok := r.ctx.Deadline()
		if ok && !d.After(now) {
			continue // its deadline passed: its caller returns with it
		}
		if !ok {
			forever = true
		} else if d.After(latest) {
			latest = d
		}
		if values == nil {
			values = r.ctx
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(values)
	if !forever {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	p.batches.Add(1)
	p.batched.Add(int64(len(live)))
	pipe := p.c.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, r := range live {
		cmds[i] = pipe.Do(ctx, r.args...)
	}
	// Each command has its own result, but for one case: before go-redis
	// v9.22.0, a pipeline that could not get a connection (a dial or
	// handshake that timed out, as with a frozen node) and whose retries
	// ran out left every command with no value and no error, and only
	// Exec's error said what happened. A reply always sets one of the two
	// (a nil reply is redis.Nil), so a command with neither was not
	// answered and gets Exec's error.
	_, execErr := pipe.Exec(ctx)
	for i, r := range live {
		r.val, r.err = cmds[i].Result()
		if r.val == nil && r.err == nil && execErr != nil {
			r.err = execErr
		}
		if r.state.CompareAndSwap(waiting, answered) {
			r.done <- struct{}{}
		}
	}
}
