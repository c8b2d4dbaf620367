package quorum

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlines hands out request contexts whose Done channels are shared: one
// channel, closed by one timer, serves every request whose deadline falls
// within a slack before the channel's closing time. A request then costs
// one small allocation and no timer of its own, where context.WithTimeout
// costs five allocations and a timer started and stopped per request.
//
// The context's Deadline is the request's own, exact: a client that
// honours deadlines sets its socket deadlines from it. Only Done (and so
// Err) comes up to the slack late; go-redis watches Done while it waits for
// a pooled connection, so such a wait may outlast the node timeout by the
// slack (timeout/16, at least 1 ms).
//
// The zero value is ready to use. Its timers need no stopping: each fires
// once, by its request's deadline plus the slack, and only closes its
// channel.
type deadlines struct {
	cur atomic.Pointer[deadlineBucket]
	mu  sync.Mutex // serializes the making of a new bucket
}

// deadlineBucket is a Done channel and when it closes.
type deadlineBucket struct {
	end  time.Time
	done chan struct{}
}

// roundDeadlines serves the ends of the waits of the rounds of several
// nodes.
var roundDeadlines deadlines

// slack is how late a request's Done may close after its deadline.
func slack(timeout time.Duration) time.Duration {
	return max(timeout/16, time.Millisecond)
}

// fits reports whether b's channel closes at d or at most slack after it.
func (b *deadlineBucket) fits(d time.Time, slack time.Duration) bool {
	return b != nil && !b.end.Before(d) && b.end.Sub(d) <= slack
}

// context returns a context with parent's values (parent must not be
// cancellable: see detach), deadline now+timeout, and a Done channel that
// closes at the deadline or at most slack(timeout) after it.
func (ds *deadlines) context(parent context.Context, now time.Time, timeout time.Duration) context.Context {
	c := new(sharedDeadlineCtx)
	ds.fill(c, parent, now, timeout)
	return c
}

// fill makes c such a context, in memory the caller allocated with other
// state of the request (Round.begin: one allocation, not two).
func (ds *deadlines) fill(c *sharedDeadlineCtx, parent context.Context, now time.Time, timeout time.Duration) {
	d := now.Add(timeout)
	*c = sharedDeadlineCtx{Context: parent, deadline: d, b: ds.at(now, timeout)}
}

// at returns the bucket whose channel closes at now+timeout or at most
// slack(timeout) after it: the end of a wait, shared with other waits that
// end at about the same time.
func (ds *deadlines) at(now time.Time, timeout time.Duration) *deadlineBucket {
	d, s := now.Add(timeout), slack(timeout)
	b := ds.cur.Load()
	if !b.fits(d, s) {
		b = ds.bucket(d, s)
	}
	return b
}

func (ds *deadlines) bucket(d time.Time, s time.Duration) *deadlineBucket {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if b := ds.cur.Load(); b.fits(d, s) {
		return b
	}
	b := &deadlineBucket{end: d.Add(s), done: make(chan struct{})}
	time.AfterFunc(time.Until(b.end), func() { close(b.done) })
	ds.cur.Store(b)
	return b
}

// sharedDeadlineCtx is a request context from deadlines.
type sharedDeadlineCtx struct {
	context.Context // values only: never cancelled
	deadline        time.Time
	b               *deadlineBucket
}

func (c *sharedDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *sharedDeadlineCtx) Done() <-chan struct{}       { return c.b.done }

func (c *sharedDeadlineCtx) Err() error {
	select {
	case <-c.b.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// RequestContext returns a context for one request to the node: ctx's
// values, not its cancellation, and a deadline timeout from now, whose Done
// channel is shared with the node's other requests (it may close up to
// timeout/16 after the deadline).
func (n *Node) RequestContext(ctx context.Context, timeout time.Duration) context.Context {
	return n.deadlines.context(detach(ctx), time.Now(), timeout)
}
