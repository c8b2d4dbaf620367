//go:build linux

package robust

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/examples/fenced-storage/store"
	"github.com/redlock-go/redlock/tests/robust/failpoint"
	"github.com/redlock-go/redlock/tests/robust/history"
	"github.com/redlock-go/redlock/tests/robust/lockclient"
	"github.com/redlock-go/redlock/tests/robust/procclock"
)

// lockName is the one lock every client takes; the store's record is
// storeName.
const (
	lockName  = "robust:counter"
	storeName = "counter"
)

// What a client believes about how long it holds its lock.
const (
	beliefValidity = "validity" // the library's ValidUntil (and, refreshed, its loss)
	beliefTTL      = "ttl"      // a control: TTL from when Obtain returned
	beliefForever  = "forever"  // a control: until it is done, whatever happens
	// A control: the validity's end in real time worked out from a
	// CLOCK_MONOTONIC reading of another process (the parent's, MonoBase
	// at WallBase), as a deadline handed between processes would be.
	beliefSharedMono = "shared-monotonic"
	// A control: the validity's end worked out on the wall clock
	// (time.Now without its monotonic reading), as a deadline stored as
	// a timestamp would be.
	beliefWall = "wall"
)

// clientConfig is one client process's configuration (JSON, in the child's
// environment).
type clientConfig struct {
	ID          string          `json:"id"`
	Nodes       []string        `json:"nodes"` // host:port of each lock node
	Store       string          `json:"store"`
	Stop        int64           `json:"stop"` // Unix ns: no attempt starts after it
	Seed        uint64          `json:"seed"`
	Kind        lockclient.Kind `json:"kind"`
	TTL         time.Duration   `json:"ttl"`
	MaxTTL      time.Duration   `json:"max_ttl"`
	NodeTimeout time.Duration   `json:"node_timeout"`
	Hold        time.Duration   `json:"hold"`            // between the read and the write
	Think       time.Duration   `json:"think,omitempty"` // after each release, before the next attempt
	Bound       time.Duration   `json:"bound"`           // an Obtain call's bound
	Auto        bool            `json:"auto,omitempty"`
	Fenced      bool            `json:"fenced"`
	Guard       bool            `json:"guard"`
	FastRetry   bool            `json:"fast_retry,omitempty"`
	// NoBreaker turns the Client's circuit breaker off: a scenario of
	// heavy loss, whose point is safety while some holds still happen,
	// where the breaker would keep the clients from trying.
	NoBreaker   bool             `json:"no_breaker,omitempty"`
	Belief      string           `json:"belief"`
	HoldFull    bool             `json:"hold_full,omitempty"` // hold until 5 ms before the believed end
	ClockOffset time.Duration    `json:"clock_offset,omitempty"`
	ClockRate   float64          `json:"clock_rate,omitempty"` // 0: 1
	Failpoints  []failpoint.Spec `json:"failpoints,omitempty"`
	// The parent's CLOCK_MONOTONIC and wall clock read at one instant
	// (beliefSharedMono).
	MonoBase int64 `json:"mono_base,omitempty"`
	WallBase int64 `json:"wall_base,omitempty"`
	// Jumps of the process's own clocks (package procclock): each of
	// ClockJumps at its time; one of HoldJumps, in turn, right after each
	// obtain (before the client works out how long it holds).
	ClockJumps []clockJump `json:"clock_jumps,omitempty"`
	HoldJumps  []clockJump `json:"hold_jumps,omitempty"`
}

// clockJump is a jump of a client process's clock.
type clockJump struct {
	At    int64           `json:"at,omitempty"` // Unix ns of real time (ClockJumps)
	Clock procclock.Clock `json:"clock"`
	By    time.Duration   `json:"by"`
}

func (j clockJump) String() string {
	sign := "+"
	if j.By < 0 {
		sign = ""
	}
	return fmt.Sprintf("%s %s%v", j.Clock, sign, j.By)
}

// maxIterations bounds a client's loop, whatever its time bound.
const maxIterations = 100000

// emitter writes a child's records to its parent, one line each: "ev" and
// a history event, or "in" and 1 or 0 when the client starts or ends its
// work under the lock.
type emitter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (e *emitter) line(kind string, v any) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	fmt.Fprintf(e.w, "%s %s\n", kind, b)
	_ = e.w.Flush()
	e.mu.Unlock()
}

func (e *emitter) ev(ev history.Event) { e.line("ev", ev) }
func (e *emitter) in(v int)            { e.line("in", v) }

// nodeClient is a go-redis client for a lock node, with timeouts short
// enough that an unreachable node costs little, and never shorter than the
// lock client's node timeout (0: the defaults): a dial timeout below a
// slow link's round trip would leave a node unreachable for good after
// its first broken connection.
func nodeClient(addr string, nodeTimeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           max(200*time.Millisecond, nodeTimeout),
		ReadTimeout:           max(500*time.Millisecond, nodeTimeout),
		WriteTimeout:          max(500*time.Millisecond, nodeTimeout),
		MaxRetries:            -1,
	})
}

// clientClock is a client's clock: offset from real time and running at
// rate, with a monotonic reading (derived from time.Now).
type clientClock struct {
	base   time.Time
	offset time.Duration
	rate   float64
}

func (c clientClock) now() time.Time {
	return c.base.Add(c.offset + time.Duration(float64(time.Since(c.base))*c.rate))
}

// runClient is a child process's main: one client running its workload
// until cfg.Stop.
func runClient(raw string) int {
	var cfg clientConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "client config:", err)
		return 2
	}
	out := &emitter{w: bufio.NewWriter(os.Stdout)}
	// The process's own clocks, for the parent to see a time namespace's
	// offset: CLOCK_MONOTONIC (Value) read with the wall clock (Inv).
	out.ev(history.Event{Type: history.TypeNote, Client: cfg.ID, Text: "clock",
		CallFields: history.CallFields{Inv: time.Now().UnixNano()}, StoreFields: history.StoreFields{Value: monoNow()}})
	fps := failpoint.NewSet(cfg.Failpoints, cfg.Seed)
	var nodes []redis.UniversalClient
	var rcs []*redis.Client
	for i, a := range cfg.Nodes {
		rc := nodeClient(a, cfg.NodeTimeout)
		if len(cfg.Failpoints) > 0 {
			rc.AddHook(fps.Hook(i))
		}
		rcs = append(rcs, rc)
		nodes = append(nodes, rc)
	}
	jumper, err := newJumper(cfg, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	defer jumper.close()
	clk := clientClock{base: time.Now(), offset: cfg.ClockOffset, rate: cfg.ClockRate}
	lc := lockclient.Config{NodeTimeout: cfg.NodeTimeout, MaxTTL: cfg.MaxTTL, NoGuard: !cfg.Guard, FastRetry: cfg.FastRetry, NoBreaker: cfg.NoBreaker}
	if clk.rate == 0 {
		clk.rate = 1
	}
	if clk.offset != 0 || clk.rate != 1 {
		lc.Now = clk.now
	}
	c, err := lockclient.New(nodes, lc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	sdb := redis.NewClient(&redis.Options{Addr: cfg.Store, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer func() {
		_ = c.Close()
		for _, rc := range rcs {
			_ = rc.Close()
		}
		_ = sdb.Close()
	}()
	work(cfg, c, store.New(sdb, storeName), clk, jumper, out)
	for i, n := range fps.Fired() {
		sp := fps.Specs()[i]
		out.ev(history.Event{Type: history.TypeFault, Client: cfg.ID, Text: sp.String(),
			FaultFields: history.FaultFields{Fault: "failpoint " + sp.Point, Target: fmt.Sprintf("nodes %v", sp.Nodes),
				Start: sp.Start, Stop: sp.Stop, Count: n}})
	}
	return 0
}

// work runs the client's loop: obtain, a fenced read-modify-write of the
// counter (a reader: a shared read) held as the client believes it may,
// release.
//
// Its history's times are read from the kernel's clock (stamp), past the
// jumps of the process's own clocks; what the client believes is worked
// out with its own clocks and mapped to real time.
func work(cfg clientConfig, c *lockclient.Client, st *store.Store, clk clientClock, jumper *jumper, out *emitter) {
	stop := time.Unix(0, cfg.Stop)
	for n := 0; n < maxIterations && stamp().Before(stop); n++ {
		inv := stamp()
		octx, cancel := context.WithTimeout(context.Background(), cfg.Bound)
		l, err := c.Obtain(octx, lockName, cfg.Kind, cfg.TTL, cfg.ID, cfg.Auto)
		cancel()
		resp := stamp()
		at := history.Event{Type: history.TypeAttempt, Client: cfg.ID,
			CallFields: history.CallFields{Inv: inv.UnixNano(), Resp: resp.UnixNano(), OK: err == nil}}
		if err != nil {
			at.Err = err.Error()
			out.ev(at)
			sleepUntil(stamp().Add(10*time.Millisecond), stop)
			continue
		}
		out.ev(at)
		h := history.Event{Type: history.TypeHold, Client: cfg.ID,
			HoldFields: history.HoldFields{Kind: string(cfg.Kind), Token: l.Token(), Obtained: resp.UnixNano()}}
		// remaining is the validity left as the process's clocks
		// measure it, in real time.
		remaining := func() time.Duration {
			return time.Duration(float64(l.ValidUntil().Sub(clk.now())) / clk.rate)
		}
		wallEnd := time.Now().Round(0).Add(remaining())
		believed := func() time.Time {
			switch cfg.Belief {
			case beliefTTL:
				return resp.Add(cfg.TTL)
			case beliefForever:
				return resp.Add(24 * time.Hour)
			case beliefSharedMono:
				return time.Unix(0, cfg.WallBase+monoNow()-cfg.MonoBase).Add(remaining())
			case beliefWall:
				return stamp().Add(wallEnd.Sub(time.Now().Round(0)))
			}
			return stamp().Add(remaining())
		}
		jumper.hold()
		end := believed()
		out.in(1)
		h.Lost = !hold(cfg, l, st, believed, &end, out)
		out.in(0)
		// The hold ends when the client's own clocks say its lock has
		// ended (believed now, after any jump during the hold), or when
		// it is done, whichever is first.
		h.End = min(stamp().UnixNano(), believed().UnixNano())
		_ = l.Release()
		out.ev(h)
		sleepUntil(stamp().Add(cfg.Think), stop)
	}
}

// hold is the work under the lock; it reports false when the work was
// given up because the lock was lost (an automatically refreshed lock whose
// refresh failed: the library says so). end is the believed end of the
// hold, moved on by refreshes.
func hold(cfg clientConfig, l *lockclient.Lock, st *store.Store, believed func() time.Time, end *time.Time, out *emitter) bool {
	token := l.Token()
	storeToken := token
	if !cfg.Fenced {
		storeToken = 1
	}
	ev := func(op string, inv, resp time.Time, value, prev int64, err error) string {
		res := history.OK
		switch {
		case errors.Is(err, store.ErrStale):
			res = history.Stale
		case err != nil:
			res = history.Unknown
		}
		out.ev(history.Event{Type: history.TypeStore, Client: cfg.ID,
			CallFields:  history.CallFields{Inv: inv.UnixNano(), Resp: resp.UnixNano()},
			StoreFields: history.StoreFields{Op: op, StoreToken: storeToken, LockToken: token, Value: value, Prev: prev, Result: res}})
		return res
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	heeds := cfg.Belief == beliefValidity
	if cfg.Auto && heeds && l.Lost() {
		return false
	}
	if cfg.Kind == lockclient.Read {
		inv := stamp()
		v, err := st.ReadShared(sctx, storeToken)
		ev(history.OpShared, inv, stamp(), atoi(v), 0, err)
		return wait(cfg, l, believed, end, cfg.Hold, heeds)
	}
	inv := stamp()
	v, err := st.ReadFenced(sctx, storeToken)
	if ev(history.OpRead, inv, stamp(), atoi(v), 0, err) != history.OK {
		return true // refused or unknown: nothing to write
	}
	prev := atoi(v)
	d := cfg.Hold
	if cfg.HoldFull && cfg.Belief != beliefForever {
		d = end.Sub(stamp()) - 5*time.Millisecond
	}
	if !wait(cfg, l, believed, end, d, heeds) {
		return false
	}
	inv = stamp()
	err = st.Write(sctx, storeToken, strconv.FormatInt(prev+1, 10))
	ev(history.OpWrite, inv, stamp(), prev+1, prev, err)
	return true
}

// wait waits d under the lock. A client that heeds its lock gives up when
// an automatically refreshed lock is lost; it notes each refresh's new
// validity in end.
func wait(cfg clientConfig, l *lockclient.Lock, believed func() time.Time, end *time.Time, d time.Duration, heeds bool) bool {
	if d <= 0 {
		return !(heeds && cfg.Auto && l.Lost())
	}
	if !cfg.Auto {
		time.Sleep(d)
		return true
	}
	until := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(until) {
		select {
		case <-l.Done():
			if heeds {
				return false
			}
			time.Sleep(time.Until(until))
			return true
		case <-tick.C:
			if u := believed(); heeds && u.After(*end) {
				*end = u
			}
		}
	}
	return !(heeds && l.Lost())
}

// sleepUntil sleeps until t, or until limit when it is earlier, both in
// real time.
func sleepUntil(t, limit time.Time) {
	if limit.Before(t) {
		t = limit
	}
	if d := t.Sub(stamp()); d > 0 {
		time.Sleep(d)
	}
}

// stamp is the time of a history's event: the kernel's CLOCK_REALTIME,
// which the jumps of a client's clocks do not move.
func stamp() time.Time { return procclock.RealNow() }

// monoNow reads CLOCK_MONOTONIC itself, in nanoseconds (time.Now's
// monotonic reading is relative to the process's start).
func monoNow() int64 { return procclock.MonoNow() }

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
