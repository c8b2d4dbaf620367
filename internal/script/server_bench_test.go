package script

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// BenchmarkServerCycle measures what one uncontended acquire-release cycle
// costs the Redis server, as server CPU (INFO cpu, user + system, in µs per
// cycle: the metric server-µs/cycle), next to the floor: SET NX PX and a
// compare-and-delete script. The client's time and the machine's load do
// not enter the metric, only what the server spent, so modes compare within
// one run even on a busy machine. The modes guard-off and guard-on run the
// acquire and the release as the package does (the acquire by FCALL,
// library.go); their -evalsha twins run the acquire's script with EVALSHA,
// as on a node without functions. exec-µs/cycle is the commands' own execution time per cycle
// (INFO commandstats, the usec of every command but INFO's), without the
// parsing and system calls that dominate server-µs/cycle. The mode
// guard-off-release-pre44 releases with the release script before issue
// 44, which retired no token (pre44Release), for a comparison within one
// run:
//
//	go test -run '^$' -bench ServerCycle -benchtime 20000x ./internal/script
func BenchmarkServerCycle(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	guard := Guard{MaxTTL: 200 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour, RecordTTL: 24 * time.Hour}.Prepared()
	waitVoting(b, c, guard)
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	modes := []struct {
		name  string
		cycle func(v string) error
	}{
		{"floor", func(v string) error {
			if err := c.SetNX(ctx, "{floor}", v, 10*time.Second).Err(); err != nil {
				return err
			}
			return del.Run(ctx, c, []string{"{floor}"}, v).Err()
		}},
	}
	for _, g := range []struct {
		name string
		g    Guard
	}{{"guard-off", off.Prepared()}, {"guard-on", guard}} {
		for _, evalsha := range []bool{false, true} {
			name := g.name
			if evalsha {
				name += "-evalsha"
			}
			k := keys("lock-" + name)
			modes = append(modes, struct {
				name  string
				cycle func(v string) error
			}{name, func(v string) error {
				acq := AcquireCall(k, NewLockArgs(k.Lock, v), 10*time.Second, g.g)
				if evalsha {
					acq = acq.scripted()
				}
				a, err := acq.Acquire(ctx, nodeOf(c), Ack{})
				if err != nil {
					return err
				}
				if !a.OK() {
					return errNotTaken(a)
				}
				// The release retires the token, as the package's does.
				rel := ReleaseCall(NewLockArgs(k.Lock, v), Retire{Fence: k.Fence, Token: a.Token, Guard: g.g}, true, false)
				_, err = rel.Release(ctx, nodeOf(c))
				return err
			}})
		}
	}
	old := redis.NewScript(pre44Release)
	k := keys("lock-guard-off-release-pre44")
	modes = append(modes, struct {
		name  string
		cycle func(v string) error
	}{"guard-off-release-pre44", func(v string) error {
		a, err := AcquireCall(k, NewLockArgs(k.Lock, v), 10*time.Second, off.Prepared()).Acquire(ctx, nodeOf(c), Ack{})
		if err != nil {
			return err
		}
		if !a.OK() {
			return errNotTaken(a)
		}
		return old.Run(ctx, c, []string{k.Lock}, v, "0").Err()
	}})
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			i := 0
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			before := serverCPU(b, c)
			for b.Loop() {
				i++
				if err := m.cycle("v" + strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(serverCPU(b, c)-before)/float64(b.N), "server-µs/cycle")
			b.ReportMetric(float64(execUsec(b, c))/float64(b.N), "exec-µs/cycle")
		})
	}
}

// waitVoting waits until the node votes under guard: a fresh server
// recovers for its first window.
func waitVoting(b *testing.B, c *redis.Client, guard Guard) {
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := Acquire(ctx, nodeOf(c), keys("warm"), "v", time.Second, guard, Ack{})
		if err != nil {
			b.Fatal(err)
		}
		if a.OK() {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("node still recovering: %+v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkServerScript measures what the acquire's shape costs the server
// to execute, apart from the network: requests are pipelined, 64 cycles a
// batch over 64 locks (so that the locks' counters exist, as in steady
// use), each an acquire and a DEL. The variants go from the floor's bare
// SET NX PX to the real acquire (guard on), through scripts that do less:
// an empty script with the acquire's keys and arguments, one that only runs
// SET NX PX, and the least that a fenced acquire with the guard's fast path
// must run (MGET of the guard's key and the counter, SET NX PX, SET of the
// counter). call-µs/op is the top-level command's execution time (INFO
// commandstats: SET's or EVALSHA's usec per call, the calls a script makes
// included); server-µs/op is the server's CPU per cycle, parsing and I/O
// included (INFO cpu):
//
//	go test -run '^$' -bench ServerScript -benchtime 50000x -count 5 ./internal/script
func BenchmarkServerScript(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	guard := Guard{MaxTTL: 200 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour, RecordTTL: 24 * time.Hour}.Prepared()
	waitVoting(b, c, guard)
	load := func(src string) string {
		sha, err := c.ScriptLoad(ctx, src).Result()
		if err != nil {
			b.Fatal(err)
		}
		return sha
	}
	// The node's identity, for the acquire that checks it (epoch.lua's
	// node_is): every Client's guard names it once the node is identified.
	id, err := Identify(ctx, nodeOf(c), "{}:id")
	if err != nil {
		b.Fatal(err)
	}
	identified := guard.ForNode(id.ID)
	variants := []struct {
		name, sha string
		g         *Guard // nil: guard
	}{
		{"set", "", nil},
		{"script-empty", load(`return {1, 1}`), nil},
		{"script-set", load(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, 1} end return {0, 0}`), nil},
		{"script-3calls", load(`local pre = redis.call('MGET', KEYS[3] .. ':ok', KEYS[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local v = (tonumber(pre[2]) or 0) + 1
  redis.call('SET', KEYS[2], string.format('%d', v), 'PX', ARGV[6])
  return {1, v}
end
return {0, 0}`), nil},
		{"acquire", acquire.sha, nil},
		{"fcall-empty", "fcall:redlock_bench_empty", nil},
		{"fcall-acquire", "fcall:" + functionName("acquire"), nil},
		{"fcall-acquire-identified", "fcall:" + functionName("acquire"), &identified},
	}
	if err := c.ScriptLoad(ctx, acquire.src).Err(); err != nil {
		b.Fatal(err)
	}
	// waitVoting's acquire loaded the library (FUNCTION LOAD).
	if err := c.FunctionLoad(ctx, "#!lua name=redlock_bench\nredis.register_function('redlock_bench_empty', function() return {1, 1} end)").Err(); err != nil {
		b.Fatal(err)
	}
	for _, v := range variants {
		b.Run("variant="+v.name, func(b *testing.B) {
			top := "evalsha"
			fn, isFn := strings.CutPrefix(v.sha, "fcall:")
			switch {
			case v.sha == "":
				top = "set"
			case isFn:
				top = "fcall"
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			before := serverCPU(b, c)
			i := 0
			pipe := c.Pipeline()
			flush := func() {
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, cmd := range cmds {
					if cmd.Err() != nil {
						b.Fatal(cmd.Err())
					}
				}
			}
			g := guard
			if v.g != nil {
				g = *v.g
			}
			for b.Loop() {
				k := keys("bench:" + strconv.Itoa(i%64))
				val := "v" + strconv.Itoa(i)
				switch {
				case v.sha == "":
					pipe.SetNX(ctx, k.Lock, val, 10*time.Second)
				case isFn:
					pipe.FCall(ctx, fn, []string{k.Lock, k.Fence, k.Epoch}, append([]any{val, 10000}, g.args()...)...)
				default:
					pipe.EvalSha(ctx, v.sha, []string{k.Lock, k.Fence, k.Epoch}, append([]any{val, 10000}, g.args()...)...)
				}
				pipe.Del(ctx, k.Lock)
				if i++; i%64 == 0 {
					flush()
				}
			}
			flush()
			b.ReportMetric(float64(serverCPU(b, c)-before)/float64(b.N), "server-µs/op")
			b.ReportMetric(commandUsec(b, c, top), "call-µs/op")
		})
	}
}

// pre44Release is release.lua before issue 44, which retired no token.
const pre44Release = `local v = redis.call('GET', KEYS[1])
local mark = KEYS[1] .. ':waiters'
if v ~= false and v ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  if v == false then
    return 0
  end
  redis.call('DEL', KEYS[1])
  return 1
end
local deleted, waited = 0, 0
if v == false then
  waited = redis.call('DEL', mark)
else
  deleted, waited = 1, redis.call('DEL', KEYS[1], mark) - 1
end
if waited == 0 then
  return deleted
end
local cmd = 'PUBLISH'
if ARGV[2] == '1' then cmd = 'SPUBLISH' end
local n = redis.pcall(cmd, KEYS[1] .. ':released', '')
if type(n) ~= 'number' then n = 0 end
return deleted + 2 * n`

// BenchmarkServerRelease measures what the release script costs the
// server to execute, apart from the network and the acquire: requests are
// pipelined, 64 a batch over 64 locks, each a SET of the lock's key and
// of its counter, and the release. call-µs/op is the release's EVALSHA
// (INFO commandstats, usec per call, the calls the script makes
// included). The variants: the release before issue 44 (pre44Release);
// this release with the counter at the lock's token (INCR, the common
// case), below it (a SET of token + 1 with the counter's expiry), above it
// (nothing written), and with a token of 0 (a clean-up: nothing retired):
//
//	go test -run '^$' -bench ServerRelease -benchtime 50000x -count 5 ./internal/script
func BenchmarkServerRelease(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	old, err := c.ScriptLoad(ctx, pre44Release).Result()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.ScriptLoad(ctx, release.src).Err(); err != nil {
		b.Fatal(err)
	}
	const token = 1 << 40
	variants := []struct {
		name           string
		counter, token int64 // the counter as set, the release's token
	}{
		{"pre44", token, token},
		{"at-token", token, token},
		{"below-token", token - 5, token},
		{"above-token", token + 5, token},
		{"no-token", token, 0},
	}
	g := off.Prepared()
	for _, v := range variants {
		b.Run("variant="+v.name, func(b *testing.B) {
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			i := 0
			pipe := c.Pipeline()
			flush := func() {
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, cmd := range cmds {
					if cmd.Err() != nil {
						b.Fatal(cmd.Err())
					}
				}
			}
			for b.Loop() {
				k := keys("release:" + strconv.Itoa(i%64))
				val := "v" + strconv.Itoa(i)
				pipe.Set(ctx, k.Lock, val, 10*time.Second)
				pipe.Set(ctx, k.Fence, v.counter, time.Hour)
				if v.name == "pre44" {
					pipe.EvalSha(ctx, old, []string{k.Lock}, val, "0")
				} else {
					rt := Retire{Fence: k.Fence, Token: v.token, Guard: g}
					pipe.Do(ctx, ReleaseCall(NewLockArgs(k.Lock, val), rt, true, false).args...)
				}
				if i++; i%64 == 0 {
					flush()
				}
			}
			flush()
			b.ReportMetric(commandUsec(b, c, "evalsha"), "call-µs/op")
		})
	}
}

// execUsec is the execution time of every command since CONFIG RESETSTAT
// but INFO's (INFO commandstats), µs.
func execUsec(tb testing.TB, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" || name == "cmdstat_config" {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					tb.Fatalf("INFO commandstats: %q", line)
				}
				total += x
			}
		}
	}
	return total
}

// commandUsec is a command's mean execution time (INFO commandstats), µs.
func commandUsec(tb testing.TB, c *redis.Client, cmd string) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatalf("INFO commandstats: %q", line)
				}
				return x
			}
		}
	}
	tb.Fatalf("INFO commandstats: no %s", cmd)
	return 0
}

type errNotTaken Acquired

func (e errNotTaken) Error() string { return "not taken: status " + strconv.Itoa(int(e.Status)) }

// serverCPU is the server's CPU time so far (INFO cpu), in µs.
func serverCPU(tb testing.TB, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		sec, frac, _ := strings.Cut(v, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err1 != nil || err2 != nil {
			tb.Fatalf("INFO cpu: %q", line)
		}
		total += s*1e6 + us
	}
	return total
}

// The least scripts that keep the library's promises for a plain lock,
// for BenchmarkServerCycleBatched's floor of a fenced, guarded cycle: what
// any implementation of them must run on the server, with nothing of the
// library's generality (no re-seeds, no family, no replies for waiters).
// Numbers are formatted before they are written: a Lua number given to
// redis.call costs the server about 3 µs more than the same string.
const (
	// leastAcquire: the guard's fast path (a node past its recovery
	// keeps a mark of the longest TTL it covers and its tokens' floor),
	// the node's identity, SET NX PX, and the fencing counter raised to
	// a token above the floor, in one MGET and two writes.
	// KEYS: lock, counter, guard mark, identity; ARGV: value, TTL ms,
	// max TTL ms, identity, counter TTL ms.
	leastAcquire = `local pre = redis.call('MGET', KEYS[3], KEYS[4], KEYS[2])
local m, f = string.match(pre[1] or '', '^(%d+):(%d+)$')
if not m or tonumber(m) < tonumber(ARGV[3]) then return {-1, 0} end
if pre[2] ~= ARGV[4] then return redis.error_reply('REDLOCK_NODE') end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, 0} end
local t = math.max((tonumber(pre[3]) or 0) + 1, tonumber(f))
redis.call('SET', KEYS[2], string.format('%d', t), 'PX', ARGV[5])
return {1, t}`
	// leastRelease: compare-and-delete, and the token retired (the
	// counter raised past it, issue 44). KEYS: lock, counter; ARGV:
	// value, token, counter TTL ms.
	leastRelease = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if (tonumber(redis.call('GET', KEYS[2])) or 0) <= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], string.format('%d', tonumber(ARGV[2]) + 1), 'PX', ARGV[3])
end
return 1`
	// peerAcquire and peerRelease do what rueidislock's acquire and
	// unlock scripts do (rueidis v1.0.79): SET NX PXAT, then a GET that
	// registers the key for client-side caching; and compare-and-delete.
	peerAcquire = `local r = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', ARGV[2]) redis.call('GET', KEYS[1]) return r`
	peerRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
)

// BenchmarkServerCycleBatched measures what a whole acquire-release cycle
// costs the server when requests arrive pipelined, as many goroutines on
// an auto-pipelining client send them (batch=64: 64 acquires over 64 locks
// in one pipeline, then their 64 releases in another), and one at a time,
// as a serial caller sends them (batch=1). server-µs/cycle is the
// server's CPU per cycle (INFO cpu), exec-µs/cycle the commands' own
// execution time (INFO commandstats). The modes: the floor (SET NX PX, a
// compare-and-delete script); rueidislock's scripts (peerAcquire,
// peerRelease); the least fenced, guarded cycle (leastAcquire,
// leastRelease) by EVALSHA and as functions by FCALL; and the library's (the acquire by FCALL with the guard on
// and the node identified, the release that retires the token), both by
// the package's own calls:
//
//	go test -run '^$' -bench ServerCycleBatched -benchtime 32000x -count 10 ./internal/script
func BenchmarkServerCycleBatched(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	guard := Guard{MaxTTL: 200 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour, RecordTTL: 24 * time.Hour}.Prepared()
	waitVoting(b, c, guard)
	id, err := Identify(ctx, nodeOf(c), "{}:id")
	if err != nil {
		b.Fatal(err)
	}
	identified := guard.ForNode(id.ID)
	load := func(src string) string {
		sha, err := c.ScriptLoad(ctx, src).Result()
		if err != nil {
			b.Fatal(err)
		}
		return sha
	}
	if err := c.ScriptLoad(ctx, release.src).Err(); err != nil {
		b.Fatal(err)
	}
	leastA, leastR := load(leastAcquire), load(leastRelease)
	peerA, peerR, cad := load(peerAcquire), load(peerRelease), load(peerRelease)
	// The least scripts again as functions, called by FCALL as the
	// library's acquire is.
	lib := "#!lua name=redlock_least\n" +
		"redis.register_function('redlock_least_acquire', function(KEYS, ARGV)\n" + leastAcquire + "\nend)\n" +
		"redis.register_function('redlock_least_release', function(KEYS, ARGV)\n" + leastRelease + "\nend)\n"
	if err := c.FunctionLoad(ctx, lib).Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.Set(ctx, "{least}:ok", "200:1024", 0).Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.Set(ctx, "{least}:id", "node-a", 0).Err(); err != nil {
		b.Fatal(err)
	}
	// A mode's acquire and release of lock i with value v; token is the
	// acquire's reply, given to the release.
	type mode struct {
		name    string
		acquire func(i int, v string) []any
		token   func(reply any) (int64, error)
		release func(i int, v string, token int64) []any
	}
	lock := func(prefix string, i int) Keys { return keys(prefix + strconv.Itoa(i)) }
	setOK := func(reply any) (int64, error) {
		if reply != "OK" {
			return 0, fmt.Errorf("not taken: %v", reply)
		}
		return 0, nil
	}
	leastToken := func(reply any) (int64, error) {
		r, ok := reply.([]any)
		if !ok || len(r) != 2 || r[0] != int64(1) {
			return 0, fmt.Errorf("not taken: %v", reply)
		}
		return r[1].(int64), nil
	}
	libToken := func(reply any) (int64, error) {
		a, err := decodeAcquire(reply)
		if err == nil && !a.OK() {
			err = errNotTaken(a)
		}
		return a.Token, err
	}
	// A mode's halves, on locks named prefix+i: the least acquire and
	// release sent with head (EVALSHA and a digest, or FCALL and a
	// function), and the library's own calls.
	leastAFn, leastRFn := []any{"fcall", "redlock_least_acquire"}, []any{"fcall", "redlock_least_release"}
	leastAcq := func(head []any, prefix string) func(int, string) []any {
		return func(i int, v string) []any {
			k := lock(prefix, i)
			return append(slices.Clone(head), 4, k.Lock, k.Fence, "{least}:ok", "{least}:id", v, 10000, 200, "node-a", 3600000)
		}
	}
	leastRel := func(head []any, prefix string) func(int, string, int64) []any {
		return func(i int, v string, token int64) []any {
			k := lock(prefix, i)
			return append(slices.Clone(head), 2, k.Lock, k.Fence, v, token, 3600000)
		}
	}
	libAcq := func(prefix string) func(int, string) []any {
		return func(i int, v string) []any {
			k := lock(prefix, i)
			return AcquireCall(k, NewLockArgs(k.Lock, v), 10*time.Second, identified).args
		}
	}
	libRel := func(prefix string) func(int, string, int64) []any {
		return func(i int, v string, token int64) []any {
			k := lock(prefix, i)
			return ReleaseCall(NewLockArgs(k.Lock, v), Retire{Fence: k.Fence, Token: token, Guard: identified}, true, false).args
		}
	}
	modes := []mode{
		{"floor",
			func(i int, v string) []any { return []any{"set", lock("floor", i).Lock, v, "px", 10000, "nx"} },
			setOK,
			func(i int, v string, _ int64) []any { return []any{"evalsha", cad, 1, lock("floor", i).Lock, v} }},
		{"rueidislock-scripts",
			func(i int, v string) []any {
				return []any{"evalsha", peerA, 1, lock("peer", i).Lock, v, time.Now().Add(10 * time.Second).UnixMilli()}
			},
			setOK,
			func(i int, v string, _ int64) []any { return []any{"evalsha", peerR, 1, lock("peer", i).Lock, v} }},
		{"least", leastAcq([]any{"evalsha", leastA}, "least"), leastToken, leastRel([]any{"evalsha", leastR}, "least")},
		{"least-fcall", leastAcq(leastAFn, "least"), leastToken, leastRel(leastRFn, "least")},
		// The library's acquire with the least release, and the least
		// acquire with the library's release: which half costs what.
		{"library-acquire", libAcq("libacq"), libToken, leastRel(leastRFn, "libacq")},
		{"library-release", leastAcq(leastAFn, "librel"), leastToken, libRel("librel")},
		{"library", libAcq("lib"), libToken, libRel("lib")},
	}
	for _, batch := range []int{64, 1} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("batch=%d/mode=%s", batch, m.name), func(b *testing.B) {
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				before := serverCPU(b, c)
				tokens := make([]int64, batch)
				for done := 0; done < b.N; done += batch {
					n := min(batch, b.N-done)
					v := "v" + strconv.Itoa(done)
					acq := c.Pipeline()
					cmds := make([]*redis.Cmd, n)
					for i := range n {
						cmds[i] = acq.Do(ctx, m.acquire(i, v)...)
					}
					if _, err := acq.Exec(ctx); err != nil {
						b.Fatal(err)
					}
					for i, cmd := range cmds {
						var err error
						if tokens[i], err = m.token(cmd.Val()); err != nil {
							b.Fatal(err)
						}
					}
					rel := c.Pipeline()
					for i := range n {
						rel.Do(ctx, m.release(i, v, tokens[i])...)
					}
					res, err := rel.Exec(ctx)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if r.(*redis.Cmd).Val() == int64(0) {
							b.Fatalf("%s: a release found no lock", m.name)
						}
					}
				}
				b.ReportMetric(float64(serverCPU(b, c)-before)/float64(b.N), "server-µs/cycle")
				b.ReportMetric(float64(execUsec(b, c))/float64(b.N), "exec-µs/cycle")
			})
		}
	}
}
