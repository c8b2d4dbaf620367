package drivertest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// Replies have the shapes of driver.Node, whatever the protocol: nil,
// int64, string, []any, with RESP3 maps flattened, booleans as 1 or 0 and
// doubles and big numbers as strings, at any depth; every kind of argument
// is sent as Redis expects it.
func testReplies(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	k := unique("replies")
	binary := []byte{0, 1, 0xff, 'x', '\r', '\n'}
	steps := []struct {
		args []any
		want any
	}{
		{[]any{"GET", k + ":missing"}, nil},
		{[]any{"SET", k + ":s", "value"}, "OK"},
		{[]any{"GET", k + ":s"}, "value"},
		{[]any{"SET", k + ":b", binary}, "OK"},
		{[]any{"GET", k + ":b"}, string(binary)},
		{[]any{"SET", k + ":empty", ""}, "OK"},
		{[]any{"GET", k + ":empty"}, ""},
		{[]any{"INCRBY", k + ":n", 41}, int64(41)},
		{[]any{"INCRBY", k + ":n", int64(1)}, int64(42)},
		{[]any{"GET", k + ":n"}, "42"},
		{[]any{"PEXPIRE", k + ":n", 60000}, int64(1)},
		{[]any{"RPUSH", k + ":l", "a", "b"}, int64(2)},
		{[]any{"LRANGE", k + ":l", 0, -1}, []any{"a", "b"}},
		{[]any{"LRANGE", k + ":missing", 0, -1}, []any{}},
		{[]any{"PING"}, "PONG"},
		// Lua's replies: nested arrays, and a nil inside one (Lua false).
		{[]any{"EVAL", "return {1, {'x', 2}, 'y'}", 0}, []any{int64(1), []any{"x", int64(2)}, "y"}},
		{[]any{"EVAL", "return {1, false, 3}", 0}, []any{int64(1), nil, int64(3)}},
		// RESP3 types, which a RESP2 connection gets as the plain
		// types they are shaped to.
		{[]any{"EVAL", "redis.setresp(3); return true", 0}, int64(1)},
		{[]any{"EVAL", "redis.setresp(3); return {double = 3.5}", 0}, "3.5"},
		{[]any{"EVAL", "redis.setresp(3); return {big_number = '123456789012345678901234567890'}", 0}, "123456789012345678901234567890"},
		{[]any{"EVAL", "redis.setresp(3); return {map = {a = 1}}", 0}, []any{"a", int64(1)}},
		{[]any{"EVAL", "redis.setresp(3); return {1, {map = {b = 'c'}}}", 0}, []any{int64(1), []any{"b", "c"}}},
	}
	for _, s := range steps {
		got := do(t, n, s.args...)
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%q: %#v, want %#v", s.args, got, s.want)
		}
	}
	// A map of several fields, in any order.
	do(t, n, "HSET", k+":h", "f1", "v1", "f2", "v2")
	flat, ok := do(t, n, "HGETALL", k+":h").([]any)
	if !ok || len(flat) != 4 {
		t.Fatalf("HGETALL: %#v, want the flat array of two fields and values", flat)
	}
	m := map[any]any{flat[0]: flat[1], flat[2]: flat[3]}
	if !reflect.DeepEqual(m, map[any]any{"f1": "v1", "f2": "v2"}) {
		t.Errorf("HGETALL: %#v", flat)
	}
	// PUBSUB NUMSUB is a map in RESP3, as the sampler reads it.
	if got := do(t, n, "PUBSUB", "NUMSUB", k+":ch"); !reflect.DeepEqual(got, []any{k + ":ch", int64(0)}) {
		t.Errorf("PUBSUB NUMSUB: %#v, want [channel 0]", got)
	}
	// INFO is a verbatim string in RESP3: its text, without the format.
	info, ok := do(t, n, "INFO", "server").(string)
	if !ok || !strings.HasPrefix(info, "# Server") || infoField(info, "run_id") == "" {
		t.Errorf("INFO server: %.80q, want the text of the section", info)
	}
	// The argument slice is not modified (it may be shared by calls to
	// other nodes).
	args := []any{"SET", k + ":shared", 7, "PX", int64(60000)}
	keep := append([]any(nil), args...)
	do(t, n, args...)
	if !reflect.DeepEqual(args, keep) {
		t.Errorf("Do modified its arguments: %#v, was %#v", args, keep)
	}
}

// Error replies are errors IsReply recognizes, with Redis's text.
func testErrorReplies(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	k := unique("errors")
	do(t, n, "SET", k, "not a number")
	ctx := ctxFor(t, patience)
	cases := []struct {
		args   []any
		prefix string
	}{
		{[]any{"INCR", k}, "ERR"},
		{[]any{"LPUSH", k, "x"}, "WRONGTYPE"},
		{[]any{"EVALSHA", strings.Repeat("0", 40), 0}, "NOSCRIPT"},
		{[]any{"EVAL", "return redis.error_reply('REDLOCK_KIND held by another kind')", 0}, "REDLOCK_KIND"},
		{[]any{"EVAL", "return redis.call('NOSUCHCOMMAND')", 0}, "ERR"},
		{[]any{"NOSUCHCOMMAND"}, "ERR"},
	}
	for _, c := range cases {
		v, err := n.Do(ctx, c.args...)
		if err == nil {
			t.Errorf("%q: %#v, want an error reply", c.args, v)
			continue
		}
		if !driver.IsReply(err) {
			t.Errorf("%q: %v (%T) is not recognized as an error reply", c.args, err, err)
		}
		if !strings.HasPrefix(err.Error(), c.prefix) {
			t.Errorf("%q: %q, want an error starting with %s", c.args, err, c.prefix)
		}
	}
	// The connection is usable after error replies.
	if got := do(t, n, "GET", k); got != "not a number" {
		t.Errorf("GET after error replies: %#v", got)
	}
}

// A pipeline returns a reply per command, an error reply among them; err
// only when the node failed.
func testPipelines(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	k := unique("pipe")
	ctx := ctxFor(t, patience)
	replies, err := n.Pipe(ctx, [][]any{
		{"SET", k, "v", "PX", 60000},
		{"INCR", k},
		{"GET", k},
		{"GET", k + ":missing"},
		{"EVALSHA", strings.Repeat("0", 40), 1, k},
		{"PTTL", k},
		{"HSET", k + ":h", "f", "v"},
		{"HGETALL", k + ":h"},
	})
	must(t, "Pipe", err)
	if len(replies) != 8 {
		t.Fatalf("Pipe: %d replies for 8 commands", len(replies))
	}
	check := func(i int, want any) {
		t.Helper()
		if r := replies[i]; r.Err != nil || !reflect.DeepEqual(r.Val, want) {
			t.Errorf("reply %d: %#v, %v; want %#v", i, r.Val, r.Err, want)
		}
	}
	check(0, "OK")
	if r := replies[1]; r.Err == nil || !driver.IsReply(r.Err) || !strings.HasPrefix(r.Err.Error(), "ERR") {
		t.Errorf("reply 1 (INCR of a string): %#v, %v; want an error reply", r.Val, r.Err)
	}
	check(2, "v")
	check(3, nil)
	if r := replies[4]; r.Err == nil || !driver.IsReply(r.Err) || !strings.HasPrefix(r.Err.Error(), "NOSCRIPT") {
		t.Errorf("reply 4 (EVALSHA of an unknown script): %#v, %v; want NOSCRIPT", r.Val, r.Err)
	}
	if r := replies[5]; r.Err != nil || r.Val.(int64) <= 0 || r.Val.(int64) > 60000 {
		t.Errorf("reply 5 (PTTL): %#v, %v", r.Val, r.Err)
	}
	check(6, int64(1))
	check(7, []any{"f", "v"})

	// A long pipeline keeps its order.
	var cmds [][]any
	for i := range 200 {
		cmds = append(cmds, []any{"INCR", k + ":count"}, []any{"ECHO", fmt.Sprint(i)})
	}
	replies, err = n.Pipe(ctx, cmds)
	must(t, "Pipe of 400", err)
	for i := range 200 {
		if r := replies[2*i]; r.Err != nil || r.Val != int64(i+1) {
			t.Fatalf("INCR %d: %#v, %v", i, r.Val, r.Err)
		}
		if r := replies[2*i+1]; r.Err != nil || r.Val != fmt.Sprint(i) {
			t.Fatalf("ECHO %d: %#v, %v", i, r.Val, r.Err)
		}
	}

	// A pipeline on a standalone node runs on one connection, whatever
	// the driver does beside it: the connection's ID is the same for every
	// command of a pipeline, pipelines sent from several goroutines at once
	// included (an acquire reads its node's identity after its script in
	// one pipeline, driver.Node.Pipe).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				replies, err := n.Pipe(ctx, [][]any{{"CLIENT", "ID"}, {"ECHO", "x"}, {"CLIENT", "ID"}, {"CLIENT", "ID"}})
				if err != nil {
					errs <- err
					return
				}
				if replies[0].Err != nil || replies[0].Val != replies[2].Val || replies[0].Val != replies[3].Val {
					errs <- fmt.Errorf("one pipeline's CLIENT ID replies: %v, %v, %v", replies[0], replies[2], replies[3])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// An empty command is refused with an error, not sent or panicked on.
	if _, err := n.Pipe(ctx, [][]any{{"GET", k}, {}}); err == nil {
		t.Error("Pipe with an empty command: no error")
	}
}

// redlock's script layer over the driver: EVALSHA, NOSCRIPT and the EVAL
// that follows it, alone and in a pipeline; the acquire with WAIT in one
// pipeline; the release's PUBLISH heard through the driver's Notifier.
func testScripts(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	ctx := ctxFor(t, 4*patience)
	lockKey, err := keys.Layout{Prefix: "drivertest:"}.Lock(unique("script"))
	must(t, "lock key", err)
	k := script.Keys{Lock: lockKey, Fence: keys.Fence(lockKey), Epoch: keys.Layout{Prefix: "drivertest:"}.NodeEpoch()}
	g := script.Guard{MaxTTL: time.Minute, Delta: 50 * time.Millisecond, Mode: '0', FenceTTL: time.Hour}

	// flush empties the node's script cache and its functions: the
	// acquire (FCALL) then finds no function and loads the library, the
	// other scripts (EVALSHA) answer NOSCRIPT and fall back to EVAL.
	flush := func() {
		t.Helper()
		for _, what := range []string{"SCRIPT", "FUNCTION"} {
			if got := do(t, n, what, "FLUSH"); got != "OK" {
				t.Fatalf("%s FLUSH: %#v", what, got)
			}
		}
	}
	flush()
	a, err := script.Acquire(ctx, n, k, "mine", time.Minute, g, script.Ack{})
	if err != nil || a.Status != script.Taken || a.Token <= 0 {
		t.Fatalf("Acquire after SCRIPT FLUSH and FUNCTION FLUSH (FCALL, no such function, FUNCTION LOAD, FCALL): %+v, %v", a, err)
	}
	a2, err := script.Acquire(ctx, n, k, "theirs", time.Minute, g, script.Ack{})
	if err != nil || a2.Status != script.Held || a2.HolderTTL <= 0 {
		t.Fatalf("Acquire of a held lock (FCALL): %+v, %v", a2, err)
	}

	// The refresh of several locks in one pipeline, after a flush: the
	// pipeline's NOSCRIPT replies are sent again with EVAL.
	flush()
	items := []script.RefreshItem{{Keys: k, Value: "mine", TTL: 2 * time.Minute}, {Keys: k, Value: "theirs", TTL: time.Minute}}
	results, errs, err := script.RefreshBatch(ctx, n, items, g)
	must(t, "RefreshBatch", err)
	if errs[0] != nil || results[0] != script.Extended || errs[1] != nil || results[1] != script.NotOwner {
		t.Fatalf("RefreshBatch after SCRIPT FLUSH: %v %v, want extended and not owner", results, errs)
	}

	// The acquire followed by WAIT in one pipeline: a master without
	// replicas acknowledges none, within WAIT's timeout.
	flush()
	lockKey2, _ := keys.Layout{Prefix: "drivertest:"}.Lock(unique("wait"))
	k2 := script.Keys{Lock: lockKey2, Fence: keys.Fence(lockKey2), Epoch: k.Epoch}
	a3, err := script.Acquire(ctx, n, k2, "mine", time.Minute, g, script.Ack{Replicas: 1, Timeout: 50 * time.Millisecond})
	if err != nil || a3.Status != script.Taken || !a3.Unreplicated {
		t.Fatalf("Acquire with WAIT for a replica that does not exist: %+v, %v; want taken, unreplicated", a3, err)
	}

	// The release publishes when a waiter marked the lock, and the
	// driver's Notifier hears it.
	hub := n.Notifier()
	defer hub.Close()
	w := driver.NewWaiter()
	channel := keys.Channel(lockKey)
	if !waitFor(hub.Subscribe(channel, w), patience) {
		t.Fatal("the subscription to the release channel was not confirmed")
	}
	defer hub.Unsubscribe(channel, w)
	do(t, n, "SET", keys.Waiters(lockKey), "1", "PX", 60000)
	flush()
	rel, err := script.Release(ctx, n, lockKey, "mine", script.Retire{Fence: keys.Fence(lockKey)}, true, false)
	if err != nil || !rel.Deleted || rel.Receivers != 1 {
		t.Fatalf("Release after SCRIPT FLUSH: %+v, %v; want deleted, heard by 1", rel, err)
	}
	if !waitFor(w.C, patience) {
		t.Fatal("the release's message did not wake the waiter")
	}
	if !hub.Subscribed(channel) {
		t.Error("Subscribed is false for a confirmed subscription")
	}
	rel, err = script.Release(ctx, n, lockKey, "mine", script.Retire{Fence: keys.Fence(lockKey)}, true, false)
	if err != nil || rel.Deleted {
		t.Fatalf("second Release: %+v, %v; want not deleted", rel, err)
	}
}

// Info of a standalone node names its server.
func testInfo(t *testing.T, d Driver) {
	s, n := standalone(t, d)
	info := n.Info()
	if info.Addr != s.Addr() || !info.Unique || info.Sharded {
		t.Errorf("Info: %+v; want Addr %s, Unique, not Sharded", info, s.Addr())
	}
	ms, err := n.Masters(context.Background())
	if err != nil || ms != nil {
		t.Errorf("Masters of a standalone node: %v, %v; want nil, nil", ms, err)
	}
	t.Logf("%s: %+v", d.Name, info)
}
