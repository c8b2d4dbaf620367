package script

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/reply"
)

// TestAcquireIdentified: an acquire with the node's identity read after
// it, in its pipeline, takes the lock as Acquire does and reads the
// identity Identify reads: on a fresh server (no identity, no library:
// the pipeline is sent again after the library's load), again on the same
// server where another holds the lock, with WAIT in the pipeline, and
// after FUNCTION FLUSH.
func TestAcquireIdentified(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	const idKey = "{}:id"
	call := func(name string) Call {
		k := keys(name)
		return AcquireCall(k, NewLockArgs(k.Lock, "v-"+name), time.Minute, off)
	}

	a, id, idErr, err := call("first").AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || !a.OK() {
		t.Fatalf("fresh server: %+v, %+v, %v, %v", a, id, idErr, err)
	}
	self, err := Identify(ctx, n, idKey)
	if err != nil {
		t.Fatal(err)
	}
	if id != self || id.RunID == "" {
		t.Fatalf("identity read with the acquire %+v, Identify %+v", id, self)
	}
	if v, err := c.Get(ctx, keys("first").Lock).Result(); err != nil || v != "v-first" {
		t.Fatalf("lock key: %q, %v", v, err)
	}

	// Held: the acquire's answer is a no, the identity is still read.
	k := keys("first")
	held, id2, idErr2, err2 := AcquireCall(k, NewLockArgs(k.Lock, "other"), time.Minute, off).AcquireIdentified(ctx, n, Ack{}, idKey)
	if err2 != nil || idErr2 != nil || held.Status != Held || id2 != self {
		t.Fatalf("held: %+v, %+v, %v, %v", held, id2, idErr2, err2)
	}

	// With WAIT (no replicas: taken, not replicated).
	a, id, idErr, err = call("acked").AcquireIdentified(ctx, n, Ack{Replicas: 1, Timeout: time.Millisecond}, idKey)
	if err != nil || idErr != nil || a.Status != Taken || !a.Unreplicated || id != self {
		t.Fatalf("with WAIT: %+v, %+v, %v, %v", a, id, idErr, err)
	}

	// The library gone: loaded again, the pipeline sent again.
	if err := c.Do(ctx, "FUNCTION", "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	a, id, idErr, err = call("flushed").AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || !a.OK() || id != self {
		t.Fatalf("after FUNCTION FLUSH: %+v, %+v, %v, %v", a, id, idErr, err)
	}
}

// TestAcquireRecorded: an acquire with a record before it and the
// node's identity after it, in one pipeline: the record reaches the node
// (its field is read back, beside another Client's), the acquire takes
// the lock, the identity is Identify's; on a fresh server (the pipeline
// sent again after the library's load: the record kept once more), where
// the lock is held, with WAIT, and on a recovering node (the restart
// guard: neither the record nor the acquire writes).
func TestAcquireRecorded(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	const idKey, confKey, epochKey = "{}:id", "{}:configs", "{}:epoch"
	rec := func(g Guard, name string) RecordCall {
		return NewRecordCall(confKey, epochKey, g, []RecordField{{Name: name, TTL: time.Minute}}, nil)
	}
	call := func(name string, g Guard) Call {
		k := keys(name)
		return AcquireCall(k, NewLockArgs(k.Lock, "v-"+name), time.Minute, g)
	}
	if _, err := Record(ctx, n, confKey, epochKey, off, []RecordField{{Name: "c:other", TTL: time.Minute}}, nil); err != nil {
		t.Fatal(err)
	}

	a, recs, recErr, id, idErr, err := call("first", off).AcquireRecorded(ctx, n, Ack{}, rec(off, "c:mine"), idKey)
	if err != nil || recErr != nil || idErr != nil || !a.OK() {
		t.Fatalf("fresh server: %+v, %+v, %v, %+v, %v, %v", a, recs, recErr, id, idErr, err)
	}
	if _, ok := recs.Fields["c:mine"]; !ok || recs.Now == 0 {
		t.Fatalf("own field not read back: %+v", recs)
	}
	if _, ok := recs.Fields["c:other"]; !ok {
		t.Fatalf("the other Client's field not read: %+v", recs)
	}
	self, err := Identify(ctx, n, idKey)
	if err != nil || id != self {
		t.Fatalf("identity read with the acquire %+v, Identify %+v (%v)", id, self, err)
	}

	k := keys("first")
	held, _, recErr, id2, idErr, err := AcquireCall(k, NewLockArgs(k.Lock, "other"), time.Minute, off).AcquireRecorded(ctx, n, Ack{}, rec(off, "c:mine"), idKey)
	if err != nil || recErr != nil || idErr != nil || held.Status != Held || id2 != self {
		t.Fatalf("held: %+v, %v, %+v, %v, %v", held, recErr, id2, idErr, err)
	}

	a, _, recErr, _, _, err = call("acked", off).AcquireRecorded(ctx, n, Ack{Replicas: 1, Timeout: time.Millisecond}, rec(off, "c:mine"), idKey)
	if err != nil || recErr != nil || a.Status != Taken || !a.Unreplicated {
		t.Fatalf("with WAIT: %+v, %v, %v", a, recErr, err)
	}

	// A guard whose max TTL the fresh process has not outlived: the node
	// recovers, and neither script writes.
	guarded := NewGuard('1', time.Hour, false).WithEpoch(epochKey)
	a, recs, recErr, _, _, err = call("guarded", guarded).AcquireRecorded(ctx, n, Ack{}, rec(guarded, "c:guarded"), idKey)
	if err != nil || recErr != nil || a.Status != Recovering || recs.Recovering == 0 {
		t.Fatalf("recovering: %+v, %+v, %v, %v", a, recs, recErr, err)
	}
	if got, _ := c.HGetAll(ctx, confKey).Result(); got["c:guarded"] != "" {
		t.Fatalf("a recovering node kept the record: %v", got)
	}
	if n, _ := c.Exists(ctx, keys("guarded").Lock).Result(); n != 0 {
		t.Fatal("a recovering node took the lock")
	}
}

// TestAcquireRecordedWithoutFunctions: on a node that cannot run
// functions, the record goes by EVAL of its source before the acquire's
// EVALSHA, and a NOSCRIPT of the acquire sends the pipeline again: the
// record runs before the acquire, once or twice, and the acquire's vote
// stands.
func TestAcquireRecordedWithoutFunctions(t *testing.T) {
	c, n := startWithoutFunctions(t)
	ctx := context.Background()
	const idKey, confKey, epochKey = "{}:id", "{}:configs", "{}:epoch"
	k := keys("nofn")
	rec := NewRecordCall(confKey, epochKey, off, []RecordField{{Name: "c:mine", TTL: time.Minute}}, nil)
	a, recs, recErr, _, idErr, err := AcquireCall(k, NewLockArgs(k.Lock, "v"), time.Minute, off).AcquireRecorded(ctx, n, Ack{}, rec, idKey)
	if err != nil || recErr != nil || idErr != nil || !a.OK() {
		t.Fatalf("%+v, %+v, %v, %v, %v", a, recs, recErr, idErr, err)
	}
	if _, ok := recs.Fields["c:mine"]; !ok {
		t.Fatalf("own field not read back: %+v", recs)
	}
	noFCall(t, c)
}

// TestIdentifyWithoutFunctions: on a node that cannot run functions,
// Identify reads the identity by EVALSHA (EVAL after the fresh server's
// NOSCRIPT), writes it once, and reads the same one again; no FCALL.
func TestIdentifyWithoutFunctions(t *testing.T) {
	c, n := startWithoutFunctions(t)
	ctx := context.Background()
	const idKey = "{}:id"
	id, err := Identify(ctx, n, idKey)
	if err != nil || id.ID == "" || id.RunID == "" {
		t.Fatalf("first read: %+v, %v", id, err)
	}
	again, err := Identify(ctx, n, idKey)
	if err != nil || again != id {
		t.Fatalf("second read: %+v, %v; want %+v", again, err, id)
	}
	if stored, err := c.Get(ctx, idKey).Result(); err != nil || stored != id.ID {
		t.Fatalf("the identity stored: %q, %v; want %q", stored, err, id.ID)
	}
	if cmdCalls(t, c, "evalsha") != 2 {
		t.Fatalf("EVALSHA ran %d times, want 2", cmdCalls(t, c, "evalsha"))
	}
	noFCall(t, c)
}

// TestIdentifyReadsRunIDOncePerProcess: the identity read at the end of
// an acquire's pipeline, and Identify's, is the library's function, which
// reads INFO once per process (runid.lua): a second read asks no INFO
// and gives the same run_id; after a restart that kept the data and the library (the
// append-only file), the new process's run_id, read anew; and a user who
// may not run INFO gets none, even after another user's read.
func TestIdentifyReadsRunIDOncePerProcess(t *testing.T) {
	s := redistest.Start(t, 1, redistest.Options{Args: []string{"--appendonly", "yes"}})[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	const idKey = "{}:id"
	k := keys("l")
	call := AcquireCall(k, NewLockArgs(k.Lock, "v"), time.Minute, off)
	runID := func(c *redis.Client) string {
		t.Helper()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(info, "run_id:")
		return strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
	}

	first := runID(c)
	_, id, idErr, err := call.AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || id.RunID != first {
		t.Fatalf("first read: %+v, %v, %v; INFO's run_id %s", id, idErr, err, first)
	}
	if fns, err := c.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", libraryName).Slice(); err != nil || len(fns) != 1 {
		t.Fatalf("the library after the first read: %v, %v", fns, err)
	}
	before := cmdCalls(t, c, "info")
	_, id2, idErr, err := call.AcquireIdentified(ctx, n, Ack{}, idKey)
	if err != nil || idErr != nil || id2 != id {
		t.Fatalf("second read: %+v, %v, %v; first %+v", id2, idErr, err, id)
	}
	if after := cmdCalls(t, c, "info"); after != before+1 { // the +1: cmdCalls' own INFO
		t.Fatalf("INFO ran %d times for the second read, want none", after-before-1)
	}
	before = cmdCalls(t, c, "info")
	if alone, err := Identify(ctx, n, idKey); err != nil || alone != id {
		t.Fatalf("Identify: %+v, %v; want %+v", alone, err, id)
	}
	if after := cmdCalls(t, c, "info"); after != before+1 {
		t.Fatalf("INFO ran %d times for Identify, want none", after-before-1)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	c2 := s.Client()
	t.Cleanup(func() { _ = c2.Close() })
	second := runID(c2)
	if second == first {
		t.Fatal("the restart kept its run_id")
	}
	_, id3, idErr, err := call.AcquireIdentified(ctx, nodeOf(c2), Ack{}, idKey)
	if err != nil || idErr != nil || id3.ID != id.ID || id3.RunID != second {
		t.Fatalf("after a restart: %+v, %v, %v; want identity %s and run_id %s", id3, idErr, err, id.ID, second)
	}

	if err := c2.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	u := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "noinfo", Password: "pw"})
	t.Cleanup(func() { _ = u.Close() })
	_, id4, idErr, err := call.AcquireIdentified(ctx, nodeOf(u), Ack{}, idKey)
	if err != nil || idErr != nil || id4.ID != id.ID || id4.RunID != "" {
		t.Fatalf("a user without INFO: %+v, %v, %v; want identity %s and no run_id", id4, idErr, err, id.ID)
	}
}

// TestAcquireIdentifiedOnAReplica: on a read-only replica that holds the
// library (replicated from its master), Redis refuses the acquire's and
// the identity read's functions before they run (READONLY); the identity
// is read again by EVAL, which reads the replicated identity without
// writing, so a replica given beside its master is told apart (the
// Client refuses the node set: TestReplicaBesideItsMaster).
func TestAcquireIdentifiedOnAReplica(t *testing.T) {
	forgetNoFunctions(t)
	servers := redistest.Start(t, 2)
	master, replica := servers[0].Client(), servers[1].Client()
	t.Cleanup(func() { _ = master.Close(); _ = replica.Close() })
	ctx := context.Background()
	const idKey = "{}:id"
	k := keys("l")
	call := AcquireCall(k, NewLockArgs(k.Lock, "v"), time.Minute, off)
	if _, id, idErr, err := call.AcquireIdentified(ctx, nodeOf(master), Ack{}, idKey); err != nil || idErr != nil || id.ID == "" {
		t.Fatalf("on the master: %+v, %v, %v", id, idErr, err)
	}
	mid, err := master.Get(ctx, idKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", servers[0].Port()).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, _ := replica.Get(ctx, idKey).Result()
		libs, _ := replica.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: libraryName}).Result()
		if v == mid && len(libs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica has identity %q and %d libraries, want %q and the library", v, len(libs), mid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a, id, idErr, err := AcquireCall(keys("r"), NewLockArgs(keys("r").Lock, "v"), time.Minute, off).AcquireIdentified(ctx, nodeOf(replica), Ack{}, idKey)
	if !reply.HasPrefix(err, "READONLY") || a.OK() {
		t.Fatalf("the acquire on a replica: %+v, %v; want READONLY", a, err)
	}
	if idErr != nil || id.ID != mid {
		t.Fatalf("the identity read on a replica: %+v, %v; want the master's identity %s", id, idErr, mid)
	}
	if alone, err := Identify(ctx, nodeOf(replica), idKey); err != nil || alone.ID != mid {
		t.Fatalf("Identify on a replica: %+v, %v; want the master's identity %s", alone, err, mid)
	}
}

// TestAcquireIdentifiedWhereWritesStop: on a master that stops writes,
// Redis refuses the acquire's and the identity read's functions before
// they run; the identity is read again by EVAL. Two ways to stop them:
// fewer replicas than min-replicas-to-write (NOREPLICAS), and a failed
// save with stop-writes-on-bgsave-error, the default (MISCONF: the dir is
// removed under the server, so BGSAVE cannot create its file).
func TestAcquireIdentifiedWhereWritesStop(t *testing.T) {
	for _, tc := range []struct {
		refusal string
		stop    func(t *testing.T, c *redis.Client)
	}{
		{"NOREPLICAS", func(t *testing.T, c *redis.Client) {
			if err := c.ConfigSet(context.Background(), "min-replicas-to-write", "1").Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"MISCONF", failSave},
	} {
		t.Run(tc.refusal, func(t *testing.T) {
			forgetNoFunctions(t)
			c := redistest.Start(t, 1, redistest.Options{Args: []string{"--enable-protected-configs", "yes"}})[0].Client()
			t.Cleanup(func() { _ = c.Close() })
			n := nodeOf(c)
			ctx := context.Background()
			const idKey = "{}:id"
			self, err := Identify(ctx, n, idKey)
			if err != nil {
				t.Fatal(err)
			}
			// The library loaded, then the writes stopped.
			k := keys("l")
			if a, err := AcquireCall(k, NewLockArgs(k.Lock, "v"), time.Minute, off).Acquire(ctx, n, Ack{}); err != nil || !a.OK() {
				t.Fatalf("before: %+v, %v", a, err)
			}
			tc.stop(t, c)
			a, id, idErr, err := AcquireCall(keys("r"), NewLockArgs(keys("r").Lock, "v"), time.Minute, off).AcquireIdentified(ctx, n, Ack{}, idKey)
			if !reply.HasPrefix(err, tc.refusal) || a.OK() {
				t.Fatalf("the acquire where writes stopped: %+v, %v; want %s", a, err, tc.refusal)
			}
			if idErr != nil || id != self {
				t.Fatalf("the identity read where writes stopped: %+v, %v; want %+v", id, idErr, self)
			}
			if alone, err := Identify(ctx, n, idKey); err != nil || alone != self {
				t.Fatalf("Identify where writes stopped: %+v, %v; want %+v", alone, err, self)
			}
		})
	}
}

// failSave makes c's server fail a save, so that it stops writes
// (MISCONF): a save point, a dir removed under it, and BGSAVE. The server
// must have been started with protected configs enabled (CONFIG SET dir).
func failSave(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir() + "/gone"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"dir", dir}, {"save", "3600 1"}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s: %v", kv[0], err)
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.BgSave(ctx).Err(); err != nil {
		t.Fatalf("BGSAVE: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "rdb_last_bgsave_status:err") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the save did not fail:\n%s", info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
