package script

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	lockkeys "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecodeAcquire(t *testing.T) {
	tests := []struct {
		reply   any
		want    Acquired
		wantErr bool
	}{
		{[]any{int64(1), int64(77)}, Acquired{Status: Taken, Token: 77, Counter: 77}, false},
		{[]any{int64(1), int64(77), int64(1), int64(90)}, Acquired{Status: Taken, Token: 77, Existed: true, Counter: 90}, false},
		{[]any{int64(1), int64(77), int64(0), int64(77)}, Acquired{Status: Taken, Token: 77, Counter: 77}, false},
		{[]any{int64(1), int64(77), "1", int64(90)}, Acquired{}, true},
		{[]any{int64(0), int64(1500)}, Acquired{HolderTTL: 1500 * time.Millisecond}, false},
		{[]any{int64(0), int64(-1)}, Acquired{HolderTTL: -time.Millisecond}, false},
		{[]any{int64(2), int64(900)}, Acquired{Status: Recovering, Recovering: 900 * time.Millisecond}, false},
		{[]any{int64(1)}, Acquired{}, true},
		{[]any{int64(7), int64(0)}, Acquired{}, true},
		{[]any{"1", int64(0)}, Acquired{}, true},
		{[]any{}, Acquired{}, true},
		{int64(1), Acquired{}, true},
		{nil, Acquired{}, true},
	}
	for _, tt := range tests {
		got, err := decodeAcquire(tt.reply)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("decodeAcquire(%#v) = %+v, %v; want %+v, error %v", tt.reply, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzDecodeAcquire feeds replies of arbitrary shape: decoding must never
// panic, and must accept only the documented forms.
func FuzzDecodeAcquire(f *testing.F) {
	f.Add(int64(1), int64(0), uint8(2), false)
	f.Add(int64(0), int64(99), uint8(2), false)
	f.Add(int64(2), int64(99), uint8(2), true)
	f.Fuzz(func(t *testing.T, status, n int64, size uint8, asString bool) {
		reply := make([]any, size%6)
		for i := range reply {
			v := any(status)
			if i == 1 {
				v = n
			}
			if asString {
				v = "x"
			}
			reply[i] = v
		}
		got, err := decodeAcquire(reply)
		if err != nil {
			return
		}
		if asString || !(len(reply) == 2 || (len(reply) == 4 && status == 1)) || status < 0 || status > 2 {
			t.Fatalf("accepted %#v as %+v", reply, got)
		}
		if got.Status != Status(status) {
			t.Fatalf("decoded %#v as %+v", reply, got)
		}
	})
}

var (
	off = Guard{MaxTTL: time.Minute, Delta: 50 * time.Millisecond, Mode: '0', FenceTTL: time.Hour}
	on  = Guard{MaxTTL: 2 * time.Second, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour}
)

func keys(name string) Keys {
	return Keys{Lock: "{" + name + "}", Fence: "{" + name + "}:fence", Epoch: "{}:epoch"}
}

func TestScriptsOnRedis(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("k")

	a, err := Acquire(ctx, nodeOf(c), k, "mine", time.Minute, off, Ack{})
	if err != nil || !a.OK() || a.Token <= 0 {
		t.Fatalf("Acquire on a free key: %+v, %v", a, err)
	}
	// The same request again (a client retry after a lost reply) is a
	// success with the same token, not "held by another owner".
	if again, err := Acquire(ctx, nodeOf(c), k, "mine", time.Minute, off, Ack{}); err != nil || !again.OK() || again.Token != a.Token {
		t.Fatalf("Acquire again with our value: %+v, %v; want OK with token %d", again, err, a.Token)
	}
	held, err := Acquire(ctx, nodeOf(c), k, "theirs", time.Minute, off, Ack{})
	if err != nil || held.Status != Held || held.HolderTTL <= 0 || held.HolderTTL > time.Minute {
		t.Fatalf("Acquire of a held key: %+v, %v; want the holder's TTL", held, err)
	}
	if r, err := Release(ctx, nodeOf(c), k.Lock, "theirs", Retire{Fence: k.Fence}, true, false); err != nil || r.Deleted {
		t.Fatalf("Release by a non-owner: %+v, %v; want not deleted", r, err)
	}
	if r, err := Refresh(ctx, nodeOf(c), k, "theirs", a.Token, time.Minute, off); err != nil || r != NotOwner {
		t.Fatalf("Refresh by a non-owner: %v, %v; want NotOwner", r, err)
	}
	if r, err := Refresh(ctx, nodeOf(c), k, "mine", a.Token, 2*time.Minute, off); err != nil || r != Extended {
		t.Fatalf("Refresh by the owner: %v, %v; want Extended", r, err)
	}
	// A shorter refresh (say an older one, delayed) never shortens the key.
	if r, err := Refresh(ctx, nodeOf(c), k, "mine", a.Token, time.Second, off); err != nil || r != Extended {
		t.Fatalf("shorter Refresh: %v, %v; want Extended", r, err)
	}
	if pttl := c.PTTL(ctx, k.Lock).Val(); pttl <= time.Minute {
		t.Fatalf("PTTL after a shorter refresh: %v, want still above 1m", pttl)
	}
	sub := c.Subscribe(ctx, lockkeys.Channel(k.Lock))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	// Without its token (a clean-up's release), the release retires
	// nothing: the refresh re-seeds.
	if r, err := Release(ctx, nodeOf(c), k.Lock, "mine", Retire{Fence: k.Fence}, true, false); err != nil || !r.Deleted || r.Receivers != 1 {
		t.Fatalf("Release by the owner: %+v, %v; want deleted, heard by 1", r, err)
	}
	if m, err := sub.ReceiveMessage(ctx); err != nil || m.Channel != lockkeys.Channel(k.Lock) {
		t.Fatalf("release notification: %v, %v", m, err)
	}
	if r, err := Refresh(ctx, nodeOf(c), k, "mine", a.Token, time.Minute, off); err != nil || r != Reseeded {
		t.Fatalf("Refresh of a missing key: %v, %v; want Reseeded", r, err)
	}
	// The next holder gets a higher token.
	if _, err := Release(ctx, nodeOf(c), k.Lock, "mine", Retire{Fence: k.Fence}, true, false); err != nil {
		t.Fatal(err)
	}
	next, err := Acquire(ctx, nodeOf(c), k, "next", time.Minute, off, Ack{})
	if err != nil || !next.OK() || next.Token <= a.Token {
		t.Fatalf("next Acquire: %+v, %v; want a token above %d", next, err, a.Token)
	}
	// The second round raises, never lowers.
	if err := Fence(ctx, nodeOf(c), k, next.Token+1000, off); err != nil {
		t.Fatal(err)
	}
	if err := Fence(ctx, nodeOf(c), k, 5, off); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(ctx, k.Fence).Int64(); v != next.Token+1000 {
		t.Fatalf("counter after fencing rounds: %d, want %d", v, next.Token+1000)
	}
	if err := c.RPush(ctx, "{list}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, nodeOf(c), keys("list"), "mine", time.Minute, off, Ack{}); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("Acquire on a list: %v, want WRONGTYPE", err)
	}
}

// The guard on a node that was just started: it recovers until its start
// plus max_ttl, refuses acquires and re-seeds meanwhile, allows refreshes
// of keys it has, and a restart (a new process) starts a new epoch.
func TestEpochGuard(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("g")

	a, err := Acquire(ctx, nodeOf(c), k, "mine", time.Second, on, Ack{})
	if err != nil || a.Status != Recovering || a.Recovering <= 0 || a.Recovering > on.MaxTTL {
		t.Fatalf("Acquire on a node started just now: %+v, %v; want Recovering for up to %v", a, err, on.MaxTTL)
	}
	if r, err := Refresh(ctx, nodeOf(c), k, "mine", 0, time.Second, on); err != nil || r != NotReseeded {
		t.Fatalf("re-seed on a recovering node: %v, %v; want NotReseeded", r, err)
	}
	time.Sleep(a.Recovering + 100*time.Millisecond)
	first, err := Acquire(ctx, nodeOf(c), k, "mine", 10*time.Second, on, Ack{})
	if err != nil || !first.OK() {
		t.Fatalf("Acquire after the recovery window: %+v, %v", first, err)
	}
	// A token seeded from the node's clock: about now in ms × 1024.
	if ms := time.Now().UnixMilli(); first.Token < (ms-60_000)*1024 || first.Token > (ms+60_000)*1024 {
		t.Fatalf("first token %d is not seeded from the clock (now %d ms)", first.Token, ms)
	}

	// A restart without persistence: everything is gone, and the new
	// process recovers for max_ttl from its start.
	beforeRestart := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	a, err = Acquire(ctx, nodeOf(c), k, "other", time.Second, on, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("Acquire after a restart: %+v, %v; want Recovering", a, err)
	}
	time.Sleep(a.Recovering + 100*time.Millisecond)
	after, err := Acquire(ctx, nodeOf(c), k, "other", time.Second, on, Ack{})
	if err != nil || !after.OK() || after.Token <= first.Token {
		t.Fatalf("Acquire after recovering: %+v, %v; want a token above %d", after, err, first.Token)
	}

	// A record written by another process, as a restart that kept its
	// data finds it, on a process up for more than max_ttl (+ 1 s, the
	// uptime's rounding): it can only have forgotten locks granted
	// before it started, expired by now, so it votes at once; and the
	// counter of the old epoch reads as the floor, the start plus max_ttl
	// (x 1024), not 5. (The test's process issued after.Token itself,
	// after its start, which no real restart can: only the floor is
	// asserted.)
	time.Sleep(time.Until(beforeRestart.Add(on.MaxTTL + 1500*time.Millisecond)))
	otherProcess(t, c, k.Epoch, "check", "0", "until", "0")
	// The counter in the layout before counter.lua: a hash.
	if err := c.Del(ctx, k.Fence).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, k.Fence, "v", "5", "e", "an-old-epoch").Err(); err != nil {
		t.Fatal(err)
	}
	_, _ = Release(ctx, nodeOf(c), k.Lock, "other", Retire{Fence: k.Fence}, true, false)
	third, err := Acquire(ctx, nodeOf(c), k, "third", time.Second, on, Ack{})
	if floor := (beforeRestart.UnixMilli() + on.MaxTTL.Milliseconds()) * 1024; err != nil || !third.OK() || third.Token <= floor {
		t.Fatalf("Acquire with another process's record, up longer than max_ttl: %+v, %v; want a token above %d", third, err, floor)
	}
	_, _ = Release(ctx, nodeOf(c), k.Lock, "third", Retire{Fence: k.Fence}, true, false)
	// The old record's recovery is kept: its process (or the node a slot
	// moved from) may have been recovering.
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	otherProcess(t, c, k.Epoch, "check", "0", "until", strconv.FormatInt(now.UnixMilli()+on.MaxTTL.Milliseconds(), 10))
	a, err = Acquire(ctx, nodeOf(c), k, "fourth", time.Second, on, Ack{})
	if err != nil || a.Status != Recovering || a.Recovering < on.MaxTTL-500*time.Millisecond {
		t.Fatalf("Acquire with another process's record recovering: %+v, %v; want Recovering for about %v", a, err, on.MaxTTL)
	}
	trusting := on
	trusting.Mode = 'p'
	otherProcess(t, c, k.Epoch, "check", "0", "until", "0")
	// Trusting persistence, a record written by another process needs no
	// recovery either.
	fourth, err := Acquire(ctx, nodeOf(c), k, "fourth", time.Second, trusting, Ack{})
	if err != nil || !fourth.OK() || fourth.Token <= third.Token {
		t.Fatalf("Acquire trusting persistence: %+v, %v; want a token above %d", fourth, err, third.Token)
	}
}

func TestReplicaAckOnAMasterWithoutReplicas(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	a, err := Acquire(context.Background(), nodeOf(c), keys("ack"), "mine", time.Minute, off, Ack{Replicas: 1, Timeout: 50 * time.Millisecond})
	if err != nil || a.Status != Taken || !a.Unreplicated || a.OK() {
		t.Fatalf("Acquire asking one replica of a master without any: %+v, %v; want taken but unreplicated", a, err)
	}
}

func TestRefreshBatch(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var items []RefreshItem
	for _, name := range []string{"b1", "b2", "b3"} {
		if _, err := Acquire(ctx, nodeOf(c), keys(name), "mine", time.Second, off, Ack{}); err != nil {
			t.Fatal(err)
		}
		items = append(items, RefreshItem{Keys: keys(name), Value: "mine", TTL: time.Minute})
	}
	items[2].Value = "not-mine"
	// A hold of the family in the batch: its EVAL runs its own script. Its
	// hash is missing, so the script re-seeds it (the guard is off).
	items = append(items, FamilyRefresh(keys("f1"), &Hold{Mode: 'w', Owner: "o", ID: "h"}, 0, time.Minute))
	if err := c.ScriptFlush(ctx).Err(); err != nil { // the batch falls back to EVAL
		t.Fatal(err)
	}
	results, errs, err := RefreshBatch(ctx, nodeOf(c), items, off)
	if err != nil {
		t.Fatal(err)
	}
	want := []RefreshResult{Extended, Extended, NotOwner, Reseeded}
	for i := range items {
		if errs[i] != nil || results[i] != want[i] {
			t.Errorf("item %d: %v, %v; want %v", i, results[i], errs[i], want[i])
		}
	}
	var _ redis.Scripter = c
}

// TestRefreshCallsAreEachItemsCall checks a batch's arguments, cut from one
// array with boxes shared between items, against each item's call made on
// its own by the script's general builder (refresh.lua's KEYS and ARGV): a
// plain item with and without its boxed key and value, items of two TTLs
// and two epoch records (a Cluster's, one per lock), and a family hold's
// and a permit's, which keep their own calls.
func TestRefreshCallsAreEachItemsCall(t *testing.T) {
	ga := Guard{MaxTTL: time.Minute, Delta: time.Second, Mode: '1', FenceTTL: time.Hour}.Prepared().args()
	k := func(lock, epoch string) Keys { return Keys{Lock: lock, Fence: lock + ":fence", Epoch: epoch} }
	items := []RefreshItem{
		{Keys: k("a", "e"), Value: "va", Token: 7, TTL: time.Second},
		{Keys: k("b", "e"), Value: "vb", Token: 8, TTL: time.Second, Boxed: NewLockArgs("b", "vb")},
		{Keys: k("c", "e"), Value: "vc", Token: 9, TTL: 2 * time.Second, Boxed: NewLockArgs("c", "vc")},
		FamilyRefresh(k("d", "e"), &Hold{Mode: 'w', Owner: "o", ID: "h"}, 12, time.Second),
		{Keys: k("f", "e2"), Value: "vf", Token: 10, TTL: 2 * time.Second, Boxed: NewLockArgs("f", "vf")},
		PermitRefresh(k("g", "e2"), &Hold{Mode: 's', ID: "p", Permits: 3}, 13, time.Second),
		{Keys: k("h", "e"), Value: "vh", Token: 11, TTL: time.Second},
	}
	cmds, scripts := refreshCalls(items, ga)
	for i, it := range items {
		want := it.call(ga)
		if it.script == nil {
			want = refresh.call([]string{it.Keys.Lock, it.Keys.Epoch, it.Keys.Fence}, append(append([]any{it.Value, ms(it.TTL)}, ga...), it.Token)...)
		}
		if !reflect.DeepEqual(cmds[i], want.args) || scripts[i] != want.s {
			t.Errorf("item %d: %v, want %v", i, cmds[i], want.args)
		}
	}
	// Each call's arguments end at their own last: appending to one
	// (withHead copies; a driver may append) cannot overwrite the next.
	for i := range cmds {
		if len(cmds[i]) != cap(cmds[i]) {
			t.Errorf("item %d: len %d, cap %d", i, len(cmds[i]), cap(cmds[i]))
		}
	}
	// A batch of plain locks alone names no script: each is refresh.lua.
	plain := []RefreshItem{items[0], items[1], items[6]}
	if cmds, scripts := refreshCalls(plain, ga); scripts != nil || len(cmds) != len(plain) {
		t.Errorf("a plain batch: %d commands, scripts %v", len(cmds), scripts)
	}
}

// Right after a restart a node recovers for nearly the whole window, even
// when uptime_in_seconds, the difference of two whole-second clocks, says 1
// for a process a few milliseconds old (a bug found by the fencing tests:
// the window could shrink by up to a second).
func TestRecoveryRightAfterRestart(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	g := Guard{MaxTTL: time.Second, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour}
	for i := range 15 {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		var a Acquired
		var err error
		for range 50 { // the pool's old connections break once
			if a, err = Acquire(context.Background(), nodeOf(c), keys("r"), "v", time.Second, g, Ack{}); err == nil {
				break
			}
		}
		left := g.MaxTTL - time.Since(restarted) - 50*time.Millisecond
		if err != nil || a.Status != Recovering || a.Recovering < left {
			t.Fatalf("restart %d: %+v, %v; want recovering for at least %v", i, a, err, left)
		}
	}
}

// otherProcess makes node c's epoch record look written by another Redis
// process, as a restart with data or a promoted replica finds it: the
// fields given are set, and the fast path's key, which no other process
// would have, is deleted.
func otherProcess(t *testing.T, c redis.UniversalClient, epochKey string, fields ...any) {
	t.Helper()
	ctx := context.Background()
	if err := c.HSet(ctx, epochKey, append([]any{"run", "0123456789abcdef"}, fields...)...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, lockkeys.Trusted(epochKey)).Err(); err != nil {
		t.Fatal(err)
	}
}

// pastRecovery waits until node c lets a client with guard g vote, and
// returns the node's clock in ms.
func pastRecovery(t *testing.T, c redis.UniversalClient, g Guard) int64 {
	t.Helper()
	ctx := context.Background()
	for range 100 {
		a, err := Acquire(ctx, nodeOf(c), keys("warm-up"), "w", time.Second, g, Ack{})
		if err != nil {
			t.Fatal(err)
		}
		if a.OK() {
			_, _ = Release(ctx, nodeOf(c), keys("warm-up").Lock, "w", Retire{Fence: keys("warm-up").Fence}, false, false)
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			return now.UnixMilli()
		}
		time.Sleep(a.Recovering + 10*time.Millisecond)
	}
	t.Fatal("the node never left its recovery")
	return 0
}

// The epoch record of a promoted replica is a copy of its old master's:
// its times are of another machine's clock. A copy checked "in the future"
// (the replica's clock is behind the old master's) must not be trusted.
func TestEpochCopyFromAClockAhead(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	g := Guard{MaxTTL: 300 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour}
	now := pastRecovery(t, c, g)
	// The old master's clock is 10 s ahead: it checked its identity at
	// what is 10 s from now here. (The trust field is the layout before
	// the check field, which trusted the record until then.)
	ahead := fmt.Sprint(now + 10_000)
	otherProcess(t, c, "{}:epoch", "id", "0123456789abcdef:1",
		"base", "0", "maxttl", "300", "until", "300", "kind", "new", "check", ahead, "trust", ahead)
	a, err := Acquire(ctx, nodeOf(c), keys("copied"), "v", time.Second, g, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("Acquire with a record checked in the node's future by another process: %+v, %v; want Recovering", a, err)
	}
}

// A replica promoted with its old master's record recovers, also for a
// client that trusts persistence: persistence keeps a node's own writes,
// not those its old master never sent it.
func TestEpochPromotedReplicaTrustingPersistence(t *testing.T) {
	servers := redistest.Start(t, 2)
	master, replica := servers[0].Client(), servers[1].Client()
	t.Cleanup(func() { _ = master.Close(); _ = replica.Close() })
	ctx := context.Background()
	g := Guard{MaxTTL: 300 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: 'p', FenceTTL: time.Hour}
	if err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", servers[0].Port()).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	for i := 0; ; i++ {
		info, err := replica.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if i == 1200 { // 30 s: a full sync on a loaded machine
			t.Fatalf("replica link never came up: %s", info)
		}
		time.Sleep(25 * time.Millisecond)
	}
	pastRecovery(t, master, g)
	// The fast path's key stays on the process that checked: the record
	// replicates, the key does not.
	long := g
	long.Delta = time.Minute
	// Without the key, the acquire takes the slow path and writes it, to
	// live as long as the check is trusted: a minute for this guard.
	if err := master.Del(ctx, lockkeys.Trusted("{}:epoch")).Err(); err != nil {
		t.Fatal(err)
	}
	if a, err := Acquire(ctx, nodeOf(master), keys("o"), "v", time.Second, long, Ack{Replicas: 1, Timeout: time.Second}); err != nil || !a.OK() {
		t.Fatalf("Acquire on the master: %+v, %v", a, err)
	}
	if n := master.Exists(ctx, lockkeys.Trusted("{}:epoch")).Val(); n != 1 {
		t.Fatalf("the master has no fast-path key after an acquire")
	}
	if n := replica.Exists(ctx, "{}:epoch", lockkeys.Trusted("{}:epoch")).Val(); n != 1 {
		t.Fatalf("the replica has %d of the record and the fast-path key; want the record only", n)
	}
	if err := master.Del(ctx, lockkeys.Trusted("{}:epoch")).Err(); err != nil {
		t.Fatal(err)
	}
	if a, err := Acquire(ctx, nodeOf(master), keys("p"), "v", time.Second, g, Ack{Replicas: 1, Timeout: time.Second}); err != nil || !a.OK() {
		t.Fatalf("Acquire on the master: %+v, %v", a, err)
	}
	// A failover takes longer than delta (Sentinel's down-after-milliseconds
	// must be above it), so the copied identity check is no longer trusted.
	time.Sleep(3 * g.Delta)
	if err := replica.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	a, err := Acquire(ctx, nodeOf(replica), keys("q"), "w", time.Second, g, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("Acquire on the promoted replica, trusting persistence: %+v, %v; want Recovering", a, err)
	}
}

// Each request carries its client's guard settings; the record keeps what
// protects every client. A client with a smaller max TTL, or one that
// trusts persistence, does not shorten the recovery of another.
func TestEpochRecordKeepsTheStrictestSetting(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	short := Guard{MaxTTL: 300 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour}
	long := short
	long.MaxTTL = 5 * time.Second
	trusting := short
	trusting.Mode = 'p'
	pastRecovery(t, c, short)
	restarted := func() { // as another process's record after a restart with data
		t.Helper()
		otherProcess(t, c, "{}:epoch", "check", "0", "trust", "0")
	}

	restarted()
	if a, err := Acquire(ctx, nodeOf(c), keys("s"), "v", time.Second, short, Ack{}); err != nil || a.Status != Recovering {
		t.Fatalf("short max TTL after a restart: %+v, %v; want Recovering", a, err)
	}
	a, err := Acquire(ctx, nodeOf(c), keys("s"), "v", time.Second, long, Ack{})
	if err != nil || a.Status != Recovering || a.Recovering < long.MaxTTL-time.Second {
		t.Fatalf("long max TTL right after a short one started the epoch: %+v, %v; want Recovering for about %v", a, err, long.MaxTTL)
	}
	// The short client now waits as long as the long one: the node may
	// hold a lock of the long one's TTL.
	if a, err := Acquire(ctx, nodeOf(c), keys("s"), "v", time.Second, short, Ack{}); err != nil || a.Recovering < long.MaxTTL-time.Second {
		t.Fatalf("short max TTL after a long one: %+v, %v; want Recovering for about %v", a, err, long.MaxTTL)
	}

	// A client that trusts persistence votes after a restart with data;
	// one that does not still recovers.
	if err := c.Del(ctx, "{}:epoch").Err(); err != nil {
		t.Fatal(err)
	}
	pastRecovery(t, c, short)
	restarted()
	if a, err := Acquire(ctx, nodeOf(c), keys("t"), "v", time.Second, trusting, Ack{}); err != nil || !a.OK() {
		t.Fatalf("trusting persistence after a restart with data: %+v, %v; want a vote", a, err)
	}
	if a, err := Acquire(ctx, nodeOf(c), keys("u"), "v", time.Second, short, Ack{}); err != nil || a.Status != Recovering {
		t.Fatalf("guard on, right after a client trusting persistence: %+v, %v; want Recovering", a, err)
	}
}

// A release publishes only when an acquire was refused since the lock was
// taken (the waiters' mark); a clean-up release never does, and leaves the
// mark for the holder's release.
func TestReleasePublishesOnlyWhenWaitedFor(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := keys("w")
	channel := lockkeys.Channel(k.Lock)
	sub := c.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	take := func(value string, want Status) {
		t.Helper()
		if a, err := Acquire(ctx, nodeOf(c), k, value, 10*time.Second, off, Ack{}); err != nil || a.Status != want {
			t.Fatalf("Acquire(%s): %+v, %v; want status %d", value, a, err, want)
		}
	}
	release := func(value string, publish, wantDeleted bool, wantReceivers int64) {
		t.Helper()
		r, err := Release(ctx, nodeOf(c), k.Lock, value, Retire{Fence: k.Fence}, publish, false)
		if err != nil || r.Deleted != wantDeleted || r.Receivers != wantReceivers {
			t.Fatalf("Release(%s, publish %v): %+v, %v; want deleted %v, %d receivers", value, publish, r, err, wantDeleted, wantReceivers)
		}
	}
	take("a", Taken)
	release("a", true, true, 0) // nobody was refused: no PUBLISH
	take("a", Taken)
	take("b", Held)
	release("b", false, false, 0) // not b's: nothing happens
	release("a", true, true, 1)
	release("a", true, false, 0) // the mark went with the first release

	// A failed attempt's clean-up deletes its key without publishing and
	// leaves the mark; an expired lock's mark still publishes.
	take("a", Taken)
	take("b", Held)
	release("a", false, true, 0)
	release("a", true, false, 1)
}

// nodeOf is a test server's go-redis client as a node of the driver.
func nodeOf(c redis.UniversalClient) driver.Node { return goredis.New(c) }
