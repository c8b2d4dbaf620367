package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// A QuorumError of the fencing second round names a reason for every node
// it lists, as Nodes promises ("the reason of every node that did not
// agree"): a node that raised its counter but had voted no in the first
// round does not count, and its reason is its first-round no.
//
// Three nodes (quorum 2). n1 and n2 vote yes with disagreeing tokens (n2's
// counter is far ahead), so the obtain needs a second round; n3 holds
// another owner's key and votes no. Just before the second round's raise
// reaches n2, n2 pauses its writes (CLIENT PAUSE WRITE) for longer than
// the node timeout, so that the raise times out there: only n1 confirms,
// and the obtain fails in its second round, listing n2 (timeout) and n3
// (held).
func TestSecondRoundQuorumErrorNamesReasons(t *testing.T) {
	const (
		name = "second-round-reasons"
		key  = "{redlock:" + name + "}"
	)
	cl := startNodes(t, 3)
	ctx := context.Background()
	for i, v := range []int{1, 1000, 1} {
		if err := cl.clients[i].HSet(ctx, key+":fence", "v", v, "e", "off").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.clients[2].Set(ctx, key, "another owner", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// n3's first-round no is most often heard before the round is
	// decided: n1's and n2's acquire replies wait until n3 has answered.
	n3Answered := newSignal()
	t.Cleanup(n3Answered.fire)
	var nodes []redis.UniversalClient
	for i, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		c.AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if !isAcquire(cmd) {
				return next(ctx, cmd)
			}
			err := next(ctx, cmd)
			if i == 2 {
				n3Answered.fire()
			} else {
				n3Answered.wait(t, "n3 answered the first round")
			}
			return err
		}))
		if i == 1 {
			c.AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isFence(cmd) {
					// n2 pauses its writes for longer than the node
					// timeout: the raise times out there.
					if err := cl.clients[1].Do(ctx, "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
						return err
					}
				}
				return next(ctx, cmd)
			}))
		}
		nodes = append(nodes, c)
	}
	c := newClient(t, nodes, WithNodeTimeout(time.Second))
	l, err := c.TryObtain(ctx, name, 10*time.Second)
	if err == nil {
		_ = l.Release(ctx)
		t.Fatal("obtained, want refused in the fencing second round")
	}
	var qe *QuorumError
	if !errors.As(err, &qe) || qe.Op != "obtain (fencing token)" || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryObtain: %v; want a QuorumError of the fencing second round", err)
	}
	t.Logf("%v", err)
	if qe.Agreed != 1 || len(qe.Nodes) != 2 {
		t.Fatalf("%d agreed, nodes %+v; want 1 agreed (n1) and n2, n3 listed", qe.Agreed, qe.Nodes)
	}
	for _, n := range qe.Nodes {
		if n.Err == nil || n.Reason == "" {
			t.Errorf("node %d (%s) listed with reason %v (%q)", n.Node, n.Addr, n.Err, n.Reason)
		}
	}
	// n3's first-round no: held, or, when the first round was decided on
	// n1's and n2's yes before n3's reply was counted, pending.
	if n := qe.Nodes[1]; n.Node != 2 || !(errors.Is(n.Err, ErrHeld) || errors.Is(n.Err, quorum.ErrPending)) || !strings.Contains(n.Err.Error(), "first round") {
		t.Errorf("n3: %+v; want its first-round reason, held by another owner (or pending)", n)
	}
	if n := qe.Nodes[0]; n.Node != 1 || !errors.Is(n.Err, ErrNodeTimeout) {
		t.Errorf("n2: %+v; want the raise's timeout", n)
	}
}

// A script's identity refusal (REDLOCK_NODE) is said in words in a
// QuorumError's node reason, with the reply kept in its chain.
func TestOtherNodeError(t *testing.T) {
	for _, tc := range []struct{ reply, want string }{
		{"REDLOCK_NODE 0123456789abcdef script: x, on @user_function:70.", "a server of node identity 0123456789abcdef, not the node identified"},
		{"REDLOCK_NODE - script: x", "a server with no node identity (it lost its data), not the node identified"},
	} {
		err := otherNodeError(driver.ReplyError(tc.reply))
		if !strings.Contains(err.Error(), tc.want) || !driver.IsReply(err) || !script.IsOtherNode(errors.Unwrap(err)) {
			t.Errorf("%q: %v", tc.reply, err)
		}
	}
	if err := driver.ReplyError("WRONGTYPE x"); otherNodeError(err) != err {
		t.Errorf("another reply changed: %v", otherNodeError(err))
	}
}
