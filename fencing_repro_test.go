package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestFencingInversionThroughSecondRound reproduces review finding 1 on
// real nodes: a fencing second round that counted a confirmation from a
// node that had not voted for the lock in the first round let a lock be
// granted with a token above that of a lock granted after it.
//
// Three nodes (quorum 2), guard off. Client A's first round wins n1 and n2
// with disagreeing tokens (2 and 1001), so A needs a second round to raise
// a quorum of counters to 1001. Between A's rounds (A's reply from n2 is
// held back, as if A's process paused), client B takes n3 with token 2 and
// waits on n1, which is frozen. A's second round then reaches n2 and n3
// only. Counting n3 (the old rule), A is granted with token 1001; B's
// request runs on n1 once A's key there has expired, and B is granted
// after A with token 3. Counting first-round yes-voters only (n1, n2), A's
// second round cannot reach a quorum and A is refused.
//
// Every step waits for the previous one to have happened on the nodes;
// the only waits on the clock are the expiry of A's key on n1 and the node
// timeouts, each with a margin of a second or more.
func TestFencingInversionThroughSecondRound(t *testing.T) {
	const (
		name   = "inversion"
		key    = "{redlock:" + name + "}"
		ttlA   = 2 * time.Second
		ttlB   = 30 * time.Second
		margin = time.Second
	)
	cl := startNodes(t, 3)
	ctx := context.Background()

	// A's first-round votes will disagree: n2's counter is far ahead.
	for i, v := range []int{1, 1000, 1} {
		if err := cl.clients[i].HSet(ctx, key+":fence", "v", v, "e", "off").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Another owner's leftover on n3, so that A wins n1 and n2 only. The
	// test deletes it once A's request has run on n3 (its own expiry is a
	// back-stop only).
	if err := cl.clients[2].Set(ctx, key, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	// A and B each have their own go-redis clients, so that hooks on A's
	// touch A's requests only.
	var aNodes, bNodes []redis.UniversalClient
	for _, s := range cl.servers {
		a := s.Client()
		// B waits on frozen n1 for seconds: go-redis's default read
		// timeout (3 s) must not cut it before B's node timeout.
		b := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: 20 * time.Second})
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		// A connection in each of B's pools before n1 freezes, so that B's
		// request to n1 is queued on the node, not stuck in a handshake.
		if err := b.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		aNodes, bNodes = append(aNodes, a), append(bNodes, b)
	}

	ranOn := []*signal{newSignal(), newSignal(), newSignal()} // A's acquire reply received from node i
	resume := newSignal()                                     // lets A's reply from n2 through
	t.Cleanup(resume.fire)
	for i, n := range aNodes {
		n.(*redis.Client).AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if i == 0 && isFence(cmd) {
				// A's fence request to n1 is lost: n1 is frozen by
				// then, and on SIGCONT the order in which n1 would serve
				// it and B's queued acquire is the kernel's. Lost, it
				// cannot raise n1's counter before B's acquire there.
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Second):
				}
				cmd.SetErr(context.DeadlineExceeded)
				return cmd.Err()
			}
			err := next(ctx, cmd)
			if err == nil && isAcquire(cmd) {
				ranOn[i].fire()
				if i == 1 {
					// A pauses between its rounds: its round needs n2, so
					// it ends (and the second round starts) only when the
					// test lets this reply through.
					select {
					case <-resume.c:
					case <-time.After(20 * time.Second):
					}
				}
			}
			return err
		}))
	}
	aEvents := &eventRecorder{}
	a := newClient(t, aNodes, WithNodeTimeout(1500*time.Millisecond), WithHook(aEvents))
	b := newClient(t, bNodes, WithNodeTimeout(8*time.Second))
	t.Cleanup(func() { _ = cl.servers[0].Resume() }) // before the Clients close

	type result struct {
		l   *Lock
		err error
	}
	aDone, bDone := make(chan result, 1), make(chan result, 1)
	aStart := time.Now()
	go func() {
		l, err := a.TryObtain(ctx, name, ttlA)
		aDone <- result{l, err}
	}()
	// A's acquire has run on every node: yes on n1 and n2, no on n3.
	aOnN1 := ranOn[0].wait(t, "A's acquire ran on n1")
	ranOn[1].wait(t, "A's acquire ran on n2")
	ranOn[2].wait(t, "A's acquire ran on n3")

	// While A is paused: n3 is free again, n1 freezes, and B asks all
	// three. n3 says yes (token 2), n2 no (A's key), n1 queues the request.
	if err := cl.clients[2].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := b.TryObtain(ctx, name, ttlB)
		bDone <- result{l, err}
	}()
	eventually(t, "B's key is on n3", func() bool {
		_, ok := rawGet(t, cl.clients[2], name)
		return ok
	})
	if held := time.Since(aStart); held > 1200*time.Millisecond {
		// A's round times out on n2 after 1.5 s: it would fail in its
		// first round, and the test would prove nothing.
		t.Fatalf("A was held %v, too close to its 1.5 s node timeout: the machine is too slow for this schedule", held)
	}

	// A resumes: its second round reaches n2 and n3; n1 is frozen.
	resume.fire()
	var ra result
	select {
	case ra = <-aDone:
	case <-time.After(30 * time.Second):
		t.Fatal("A's TryObtain did not return")
	}
	if ra.err == nil {
		t.Logf("A granted with token %d", ra.l.Token())
	} else {
		t.Logf("A refused: %v", ra.err)
	}

	// Once A's key on n1 has expired (it was set before A's reply from n1
	// arrived), n1 thaws and serves B's queued acquire: yes, token 3.
	time.Sleep(time.Until(aOnN1.Add(ttlA + margin)))
	if err := cl.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	var rb result
	select {
	case rb = <-bDone:
	case <-time.After(30 * time.Second):
		t.Fatal("B's TryObtain did not return")
	}
	if rb.err != nil {
		t.Fatalf("B, asking after A's attempt, was refused: %v", rb.err)
	}
	t.Logf("B granted with token %d", rb.l.Token())

	if ra.err == nil && rb.l.Token() <= ra.l.Token() {
		t.Fatalf("B was granted after A with token %d, not above A's %d: a token inversion", rb.l.Token(), ra.l.Token())
	}
	// A must have been refused in its second round: its first round won
	// (n1 and n2), so the reproduction reached the rule under test.
	var qe *QuorumError
	if !errors.As(ra.err, &qe) || !errors.Is(ra.err, ErrNotObtained) || qe.Op != "obtain (fencing token)" {
		t.Fatalf("A: %v; want refused in its fencing second round", ra.err)
	}
	// A gave back the lock of its won first round, which it never
	// returned: its hook hears no release of it (see Hook).
	aEvents.mu.Lock()
	if len(aEvents.releases) != 0 || len(aEvents.lost) != 0 {
		t.Errorf("A's hook heard releases %+v and losses %+v of a lock A never returned", aEvents.releases, aEvents.lost)
	}
	aEvents.mu.Unlock()
	_ = rb.l.Release(ctx)
}
