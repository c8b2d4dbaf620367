package quorum

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// These tests use nodes without a Redis client: Call is a fake that answers
// from a script per node. They exercise the decision logic and the node
// health, which do not depend on Redis.

// atDeadline is a channel that a fake client honouring deadlines waits on:
// closed at ctx's deadline (a round's requests carry a deadline, not a Done
// channel), or when ctx is done.
func atDeadline(ctx context.Context) (<-chan struct{}, func()) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx.Done(), func() {}
	}
	ch := make(chan struct{})
	t := time.AfterFunc(time.Until(d), func() { close(ch) })
	return ch, func() { t.Stop() }
}

func nodes(n int) []*Node {
	ns := make([]*Node, n)
	for i := range ns {
		ns[i] = NewNode(i, nil, 0)
	}
	return ns
}

// answer is what a fake node does: wait (until release is closed, if set),
// then reply yes or no, or fail.
type answer struct {
	yes     bool
	err     error
	release chan struct{}
}

func fakeRound(ns []*Node, answers []answer) *Round[bool] {
	return &Round[bool]{
		Nodes:   ns,
		Quorum:  Count(len(ns)/2 + 1),
		Timeout: time.Minute,
		Call: func(ctx context.Context, n *Node) (bool, error) {
			a := answers[n.Index]
			if a.release != nil {
				expired, stop := atDeadline(ctx)
				defer stop()
				select {
				case <-a.release:
				case <-expired:
					return false, context.DeadlineExceeded
				}
			}
			return a.yes, a.err
		},
		Agree: func(v bool) bool { return v },
	}
}

func TestDecidesAtQuorumWithoutWaitingForSlowNodes(t *testing.T) {
	var wg sync.WaitGroup
	slow := make(chan struct{})
	r := fakeRound(nodes(5), []answer{{yes: true}, {yes: true}, {yes: true}, {yes: true, release: slow}, {yes: true, release: slow}})
	var settles atomic.Int32
	r.Settle = func(n *Node, v bool, err error, won, late bool) {
		if !won {
			t.Errorf("node %d settled with won=false", n.Index)
		}
		settles.Add(1)
	}
	res := r.Run(context.Background(), &wg)
	if !res.Won || res.Agreed != 3 {
		t.Fatalf("Won=%v Agreed=%d, want a win with 3", res.Won, res.Agreed)
	}
	for _, i := range []int{3, 4} {
		if !errors.Is(res.Replies[i].Err, ErrPending) {
			t.Errorf("slow node %d: %v, want ErrPending", i, res.Replies[i].Err)
		}
	}
	select {
	case <-res.Done:
		t.Fatal("Done closed while two nodes were still answering")
	default:
	}
	close(slow)
	<-res.Done
	wg.Wait()
	if got := settles.Load(); got != 5 {
		t.Fatalf("%d settles, want one per node (5)", got)
	}
}

func TestDecidesFailureAsSoonAsQuorumIsImpossible(t *testing.T) {
	var wg sync.WaitGroup
	slow := make(chan struct{})
	defer func() { close(slow); wg.Wait() }()
	r := fakeRound(nodes(5), []answer{{}, {}, {}, {yes: true, release: slow}, {yes: true, release: slow}})
	res := r.Run(context.Background(), &wg)
	if res.Won || res.Agreed != 0 {
		t.Fatalf("Won=%v Agreed=%d, want a loss with 0", res.Won, res.Agreed)
	}
}

// WaitOnLoss returns at a win without the slow nodes, but waits for every
// reply when the round is lost.
func TestWaitOnLoss(t *testing.T) {
	var wg sync.WaitGroup
	slow := make(chan struct{})
	r := fakeRound(nodes(5), []answer{{yes: true}, {yes: true}, {yes: true}, {yes: true, release: slow}, {yes: true, release: slow}})
	r.Wait = WaitOnLoss
	if res := r.Run(context.Background(), &wg); !res.Won || res.Agreed != 3 {
		t.Fatalf("Won=%v Agreed=%d, want a win at 3 without the slow nodes", res.Won, res.Agreed)
	}
	close(slow)
	wg.Wait()

	late := make(chan struct{})
	r = fakeRound(nodes(5), []answer{{}, {}, {}, {release: late}, {release: late}})
	r.Wait = WaitOnLoss
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(late)
	}()
	res := r.Run(context.Background(), &wg)
	wg.Wait()
	if res.Won {
		t.Fatal("won with no yes")
	}
	for i, rep := range res.Replies {
		if rep.Err != nil {
			t.Errorf("node %d: %v, want its answer: a lost round waits for every reply", i, rep.Err)
		}
	}
}

func TestLostRoundSettlesEarlyYesBeforeReturning(t *testing.T) {
	var wg sync.WaitGroup
	slow := make(chan struct{})
	r := fakeRound(nodes(5), []answer{{yes: true}, {}, {}, {}, {yes: true, release: slow}})
	// Wait for every answer until the timeout, so that node 0's yes is
	// certainly in before the decision and node 4's certainly after.
	r.Wait = WaitAll
	r.Timeout = 100 * time.Millisecond
	call := r.Call
	r.Call = func(ctx context.Context, n *Node) (bool, error) {
		if n.Index == 4 {
			<-slow // ignores its deadline: answers after the decision
		}
		return call(ctx, n)
	}
	var early, late atomic.Bool
	r.Settle = func(n *Node, v bool, err error, won, isLate bool) {
		if won {
			t.Errorf("node %d settled with won=true", n.Index)
		}
		switch n.Index {
		case 0:
			if isLate {
				t.Error("node 0's reply, in before the decision, settled as late")
			}
			time.Sleep(10 * time.Millisecond) // Run must wait for this
			early.Store(true)
		case 4:
			if !isLate {
				t.Error("node 4's reply, after the decision, settled as not late")
			}
			late.Store(true)
		}
	}
	res := r.Run(context.Background(), &wg)
	if res.Won {
		t.Fatal("won with one yes of five")
	}
	if !early.Load() {
		t.Fatal("Run returned before the early yes was settled")
	}
	close(slow)
	<-res.Done
	wg.Wait()
	if !late.Load() {
		t.Fatal("the late yes was never settled")
	}
}

func TestValidDecidesTheWin(t *testing.T) {
	var wg sync.WaitGroup
	r := fakeRound(nodes(3), []answer{{yes: true}, {yes: true}, {yes: true}})
	r.Wait = WaitAll
	r.ValidUntil = time.Now() // over by the time a quorum agrees
	var lostSettles atomic.Int32
	r.Settle = func(_ *Node, _ bool, _ error, won, _ bool) {
		if !won {
			lostSettles.Add(1)
		}
	}
	res := r.Run(context.Background(), &wg)
	wg.Wait()
	if res.Won || res.Agreed != 3 {
		t.Fatalf("Won=%v Agreed=%d: a quorum past its validity must not win", res.Won, res.Agreed)
	}
	if got := lostSettles.Load(); got != 3 {
		t.Fatalf("%d nodes settled as lost, want 3", got)
	}
}

func TestTimeoutMarksSilentNodes(t *testing.T) {
	var wg sync.WaitGroup
	never := make(chan struct{})
	defer func() { close(never); wg.Wait() }()
	ns := nodes(3)
	r := fakeRound(ns, []answer{{yes: true}, {release: never}, {release: never}})
	r.Timeout = 50 * time.Millisecond
	// A fake call that ignores its context, like a client without
	// ContextTimeoutEnabled: the round's own timer must decide.
	call := r.Call
	r.Call = func(ctx context.Context, n *Node) (bool, error) {
		if n.Index == 0 {
			return call(ctx, n)
		}
		<-never
		return false, nil
	}
	res := r.Run(context.Background(), &wg)
	if res.Won {
		t.Fatal("won with one of three")
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(res.Replies[i].Err, ErrTimeout) {
			t.Errorf("node %d: %v, want ErrTimeout", i, res.Replies[i].Err)
		}
	}
}

func TestContextEndsRound(t *testing.T) {
	var wg sync.WaitGroup
	never := make(chan struct{})
	defer func() { close(never); wg.Wait() }()
	r := fakeRound(nodes(3), []answer{{release: never}, {release: never}, {release: never}})
	r.Call = func(context.Context, *Node) (bool, error) { <-never; return false, nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, &wg)
	for i, rep := range res.Replies {
		if !errors.Is(rep.Err, context.Canceled) {
			t.Errorf("node %d: %v, want context.Canceled", i, rep.Err)
		}
	}
}

// fakeTime is a clock the breaker tests move by hand.
type fakeTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeTime) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeTime) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func TestBreakerSkipsANodeThatKeepsTimingOut(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	clock := &fakeTime{t: time.Now()}
	ns := nodes(1)
	healthy := atomic.Bool{}
	r := &Round[bool]{
		Nodes: ns, Quorum: Count(1), Timeout: time.Millisecond, Now: clock.now,
		Call: func(ctx context.Context, _ *Node) (bool, error) {
			if healthy.Load() {
				return true, nil
			}
			expired, stop := atDeadline(ctx)
			defer stop()
			<-expired
			return false, context.DeadlineExceeded
		},
		Agree: func(v bool) bool { return v },
	}
	// Each round is awaited whole, so that the node's health has been
	// updated by the time the next round is admitted.
	run := func() Result[bool] {
		res := r.Run(context.Background(), &wg)
		wg.Wait()
		return res
	}
	for i := range TripAfter {
		if err := run().Replies[0].Err; !errors.Is(err, ErrTimeout) {
			t.Fatalf("request %d: %v, want ErrTimeout", i, err)
		}
	}
	if err := run().Replies[0].Err; !errors.Is(err, ErrSkipped) {
		t.Fatalf("after %d timeouts: %v, want ErrSkipped", TripAfter, err)
	}
	healthy.Store(true)
	clock.add(Cooldown)
	// The probe succeeds and closes the breaker.
	if res := run(); !res.Won {
		t.Fatalf("probe after cooldown: %v, want success", res.Replies[0].Err)
	}
	if res := run(); !res.Won {
		t.Fatalf("after a good probe: %v, want success", res.Replies[0].Err)
	}
	// A failed probe reopens it at once.
	healthy.Store(false)
	for range TripAfter {
		run()
	}
	clock.add(Cooldown)
	if err := run().Replies[0].Err; !errors.Is(err, ErrTimeout) {
		t.Fatalf("probe: %v, want ErrTimeout", err)
	}
	if err := run().Replies[0].Err; !errors.Is(err, ErrSkipped) {
		t.Fatalf("after a failed probe: %v, want ErrSkipped", err)
	}
	if n := ns[0].InFlight(); n != 0 {
		t.Fatalf("%d requests counted in flight after all returned", n)
	}
}

// A caller that gives up does not abort the requests it sent: they run to
// their node's answer, so that their outcome is known, and a node that
// answers is not counted as timing out.
func TestCallerCancellationDoesNotAbortRequests(t *testing.T) {
	var wg sync.WaitGroup
	ns := nodes(3)
	var finished atomic.Int32
	r := &Round[bool]{
		Nodes: ns, Quorum: Count(2), Timeout: time.Minute,
		Call: func(ctx context.Context, _ *Node) (bool, error) {
			time.Sleep(50 * time.Millisecond)
			if ctx.Err() == nil {
				finished.Add(1)
			}
			return true, ctx.Err()
		},
		Agree: func(v bool) bool { return v },
	}
	for range 2 * TripAfter {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		res := r.Run(ctx, &wg)
		cancel()
		if res.Won || !errors.Is(res.Replies[0].Err, context.DeadlineExceeded) {
			t.Fatalf("round past the caller's deadline: won=%v %v", res.Won, res.Replies[0].Err)
		}
	}
	wg.Wait()
	if got := finished.Load(); got != int32(3*2*TripAfter) {
		t.Fatalf("%d of %d requests ran to their answer", got, 3*2*TripAfter)
	}
	if ns[0].Skipped(time.Now()) {
		t.Fatal("nodes that answered were skipped")
	}
}

func TestInFlightBound(t *testing.T) {
	var wg sync.WaitGroup
	block := make(chan struct{})
	ns := []*Node{NewNode(0, nil, 1)}
	r := &Round[bool]{
		Nodes: ns, Quorum: Count(1), Timeout: time.Minute,
		Call:  func(context.Context, *Node) (bool, error) { <-block; return true, nil },
		Agree: func(v bool) bool { return v },
	}
	first := make(chan Result[bool])
	go func() { first <- r.Run(context.Background(), &wg) }()
	for ns[0].InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := r.Run(context.Background(), &wg).Replies[0].Err; !errors.Is(err, ErrOverloaded) {
		t.Fatalf("second request: %v, want ErrOverloaded", err)
	}
	close(block)
	if res := <-first; !res.Won {
		t.Fatalf("first request: %v", res.Replies[0].Err)
	}
	wg.Wait()
}

// The first request can finish before the next one is started: that must
// neither cancel the others' context nor close Done twice. The clock, read
// while each node is admitted, holds the spawner back until node 0 is done.
func TestFirstAnswerBeforeLastStart(t *testing.T) {
	var wg sync.WaitGroup
	for range 20 {
		first := make(chan struct{})
		var reads atomic.Int32
		r := &Round[bool]{
			Nodes: nodes(3), Quorum: Count(2), Timeout: time.Minute, Wait: WaitAll,
			Now: func() time.Time {
				// Read 1 admits node 0; read 2 is node 0's own finish;
				// read 3 admits node 1.
				if reads.Add(1) == 3 {
					<-first
					time.Sleep(5 * time.Millisecond) // node 0 leaves the round
				}
				return time.Now()
			},
			Call: func(ctx context.Context, n *Node) (bool, error) {
				if n.Index == 0 {
					defer close(first)
				}
				return ctx.Err() == nil, ctx.Err()
			},
			Agree: func(v bool) bool { return v },
		}
		res := r.Run(context.Background(), &wg)
		if res.Agreed != 3 {
			t.Fatalf("agreed %d of 3: %+v", res.Agreed, res.Replies)
		}
		<-res.Done
	}
	wg.Wait()
}

func TestForceBypassesAdmission(t *testing.T) {
	var wg sync.WaitGroup
	ns := []*Node{NewNode(0, nil, 1)}
	block := make(chan struct{})
	r := &Round[bool]{
		Nodes: ns, Quorum: Count(1), Timeout: time.Minute,
		Call:  func(context.Context, *Node) (bool, error) { <-block; return true, nil },
		Agree: func(v bool) bool { return v },
	}
	first := make(chan struct{})
	go func() { r.Run(context.Background(), &wg); close(first) }()
	for ns[0].InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	forced := &Round[bool]{
		Nodes: ns, Quorum: Count(1), Timeout: time.Minute, Force: true,
		Call:  func(context.Context, *Node) (bool, error) { return true, nil },
		Agree: func(v bool) bool { return v },
	}
	if res := forced.Run(context.Background(), &wg); !res.Won {
		t.Fatalf("forced request at the in-flight bound: %v", res.Replies[0].Err)
	}
	close(block)
	<-first
	wg.Wait()
}
