package script

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// scripted is call as it runs on a node without functions: with EVALSHA
// (for the benchmarks and tests that compare both).
func (call Call) scripted() Call {
	if call.args[0] == "fcall" {
		call.args = withHead(call.args, call.s.boxed())
	}
	return call
}

// forgetNoFunctions clears what the package remembers of nodes without
// functions, so that a test starts from nothing.
func forgetNoFunctions(t *testing.T) {
	t.Helper()
	clear := func() {
		noFunctions.Range(func(k, _ any) bool {
			noFunctions.Delete(k)
			return true
		})
		noFunctionsN.Store(0)
	}
	clear()
	t.Cleanup(clear)
}

// Each function of the library runs its script's body, after the helpers
// its script defines before that body: the same code as the EVALSHA
// script, so the same semantics. The function names carry the version.
func TestLibraryMatchesScripts(t *testing.T) {
	helpers, fns := libFunctions()
	scripts := map[string]*luaScript{"acquire": &acquire, "record": &record, "identify": &identify}
	if len(fns) != len(scripts) {
		t.Fatalf("library functions %d, want %d", len(fns), len(scripts))
	}
	if !strings.HasPrefix(librarySrc, "#!lua name="+libraryName+"\n") {
		t.Fatalf("library source starts with %q", librarySrc[:60])
	}
	for _, f := range fns {
		s := scripts[f.name]
		if s == nil {
			t.Fatalf("function %s has no script", f.name)
		}
		if !strings.HasSuffix(s.src, f.body) {
			t.Errorf("the body of function %s is not its script's", f.name)
		}
		if !strings.Contains(librarySrc, "\nlocal function "+f.name+"(KEYS, ARGV)\n"+f.body+"\nend\n") {
			t.Errorf("the library lacks function %s's body", f.name)
		}
		if want := "function_name='" + functionName(f.name) + "'"; !strings.Contains(librarySrc, want) {
			t.Errorf("the library does not register %s", want)
		}
	}
	// The acquire's script is the helpers but run_id's and the body,
	// nothing else; the identity read's, run_id's and its body.
	if !strings.HasSuffix(acquire.src, "\n"+acquireSrc) || helpers != strings.TrimSuffix(acquire.src, acquireSrc)+runIDSrc {
		t.Error("the acquire's script is not the library's helpers and body")
	}
	if identify.src != runIDSrc+"\n"+idSrc || !strings.HasSuffix(helpers, "\n"+runIDSrc) {
		t.Error("the identity read's script is not run_id's helper and its body")
	}
	if len(libraryVersion) != 16 || libraryName != "redlock_"+libraryVersion {
		t.Errorf("library version %q, name %q", libraryVersion, libraryName)
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want fnOutcome
	}{
		{nil, fnRan},
		{errors.New("ERR Function not found"), fnRan}, // not a reply: a node failure
		{driver.ReplyError("ERR Function not found"), fnMissing},
		{driver.ReplyError("ERR unknown command 'fcall', with args beginning with: 'redlock_x_acquire' '3' "), fnUnsupported},
		// Redis 6.2's text.
		{driver.ReplyError("ERR unknown command `FCALL`, with args beginning with: `redlock_x_acquire`, `3`, "), fnUnsupported},
		{driver.ReplyError("NOPERM this user has no permissions to run the 'fcall' command"), fnUnsupported},
		{driver.ReplyError("NOPERM User u has no permissions to run the 'fcall' command"), fnUnsupported},
		// Errors of the commands the function ran: its result.
		{driver.ReplyError("NOPERM this user has no permissions to run the 'info' command script: redlock_x_acquire"), fnRan},
		{driver.ReplyError("ERR unknown command 'fcallx', with args beginning with: "), fnRan},
		{driver.ReplyError("REDLOCK_KIND {a} is held by a semaphore (Client.Semaphore), not a plain lock"), fnRan},
		{driver.ReplyError("OOM command not allowed when used memory > 'maxmemory'."), fnRan},
		{driver.ReplyError("NOSCRIPT No matching script."), fnRan},
	} {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// cmdCalls is how many times a command ran on the server (INFO
// commandstats), 0 when never.
func cmdCalls(t *testing.T, c redis.UniversalClient, cmd string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n := 0
			for _, r := range rest {
				if r < '0' || r > '9' {
					break
				}
				n = n*10 + int(r-'0')
			}
			return n
		}
	}
	return 0
}

// acquireScripted reports whether the acquire ran as a script on the
// server: the server knows its script (EVAL, after EVALSHA's NOSCRIPT,
// caches it; nothing else loads it in these tests).
func acquireScripted(t *testing.T, c redis.UniversalClient) bool {
	t.Helper()
	ok, err := c.ScriptExists(context.Background(), acquire.sha).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok[0]
}

// hasLibrary reports whether the server holds the library.
func hasLibrary(t *testing.T, c redis.UniversalClient) bool {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: libraryName}).Result()
	if err != nil && strings.HasPrefix(err.Error(), "ERR unknown command 'function'") {
		return false // renamed away
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(libs) == 1
}

// startWithoutFunctions starts a node that the package remembers as
// unable to run functions (setFunctionsOff), the memory cleared before and
// after the test.
func startWithoutFunctions(t *testing.T) (*redis.Client, driver.Node) {
	t.Helper()
	forgetNoFunctions(t)
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	setFunctionsOff(n)
	return c, n
}

// noFCall fails the test if c's node holds the library or ran FCALL.
func noFCall(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	if hasLibrary(t, c) || cmdCalls(t, c, "fcall") != 0 {
		t.Fatal("FCALL on a node remembered without functions")
	}
}

// cycle takes and releases a lock through n and fails the test unless
// both worked.
func cycle(t *testing.T, n driver.Node, k Keys, g Guard, ack Ack) {
	t.Helper()
	ctx := context.Background()
	a, err := AcquireCall(k, NewLockArgs(k.Lock, "mine"), time.Minute, g).Acquire(ctx, n, ack)
	if err != nil || a.Status != Taken || a.Token <= 0 {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	a2, err := Acquire(ctx, n, k, "theirs", time.Minute, g, ack)
	if err != nil || a2.Status != Held {
		t.Fatalf("acquire of a held lock: %+v, %v", a2, err)
	}
	r, err := Release(ctx, n, k.Lock, "mine", Retire{Fence: k.Fence, Token: a.Token, Guard: g}, true, n.Info().Sharded)
	if err != nil || !r.Deleted {
		t.Fatalf("release: %+v, %v", r, err)
	}
}

// The library is loaded on a node's first acquire, and again when the
// node lost it: FUNCTION FLUSH, and a restart without persistence. The
// acquires ran as functions, never as scripts.
func TestLibraryLoadedOnFirstUseAndAgain(t *testing.T) {
	forgetNoFunctions(t)
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	if hasLibrary(t, c) {
		t.Fatal("a new server holds the library")
	}
	cycle(t, n, keys("first"), off, Ack{})
	if !hasLibrary(t, c) {
		t.Fatal("no library after the first acquire")
	}
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// After FUNCTION FLUSH, alone and in the pipeline with WAIT.
	cycle(t, n, keys("flushed"), off, Ack{})
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := Acquire(ctx, n, keys("wait"), "mine", time.Minute, off, Ack{Replicas: 1, Timeout: 10 * time.Millisecond})
	if err != nil || a.Status != Taken || !a.Unreplicated {
		t.Fatalf("acquire with WAIT after FUNCTION FLUSH: %+v, %v", a, err)
	}
	if !hasLibrary(t, c) {
		t.Fatal("no library after FUNCTION FLUSH and an acquire")
	}
	if acquireScripted(t, c) {
		t.Error("the acquire ran as a script")
	}
	// A restart without persistence: the library is gone with the data.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if hasLibrary(t, c) {
		t.Fatal("the library survived a restart without persistence")
	}
	cycle(t, n, keys("restarted"), off, Ack{})
	if !hasLibrary(t, c) || cmdCalls(t, c, "fcall") == 0 || acquireScripted(t, c) {
		t.Error("after a restart, the calls did not run as functions")
	}
	// The guard's recovery after the restart is the script's, through the
	// function: the node recovers.
	a, err = Acquire(ctx, n, keys("guarded"), "mine", time.Minute, on, Ack{})
	if err != nil || a.Status != Recovering {
		t.Fatalf("guarded acquire right after a restart: %+v, %v; want recovering", a, err)
	}
}

// Where the node cannot run functions, the acquires run as scripts
// (EVALSHA, and EVAL after NOSCRIPT), and the node is remembered as such:
// FCALL is not tried on every call. FUNCTION renamed away (the load fails), FCALL renamed away,
// and ACL users without the function commands.
func TestLibraryFallbackToScripts(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		acl  string // ACL SETUSER rules of the user the client logs in as
	}{
		{name: "FUNCTION renamed", args: []string{"--rename-command", "FUNCTION", ""}},
		{name: "FCALL renamed", args: []string{"--rename-command", "FCALL", ""}},
		{name: "ACL without FUNCTION", acl: "+@all -function"},
		{name: "ACL without FCALL", acl: "+@all -fcall"},
		{name: "ACL without @scripting but scripts", acl: "+@all -@scripting +evalsha +eval"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forgetNoFunctions(t)
			s := redistest.Start(t, 1, redistest.Options{Args: tt.args})[0]
			admin := s.Client()
			t.Cleanup(func() { _ = admin.Close() })
			c := admin
			ctx := context.Background()
			if tt.acl != "" {
				rules := append([]any{"ACL", "SETUSER", "u", "on", ">pw", "~*", "&*"}, anys(strings.Fields(tt.acl))...)
				if err := admin.Do(ctx, rules...).Err(); err != nil {
					t.Fatal(err)
				}
				c = redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "u", Password: "pw"})
				t.Cleanup(func() { _ = c.Close() })
			}
			n := nodeOf(c)
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			cycle(t, n, keys("a"), off, Ack{})
			cycle(t, n, keys("b"), off, Ack{})
			a, err := Acquire(ctx, n, keys("wait"), "mine", time.Minute, off, Ack{Replicas: 1, Timeout: 10 * time.Millisecond})
			if err != nil || a.Status != Taken || !a.Unreplicated {
				t.Fatalf("acquire with WAIT: %+v, %v", a, err)
			}
			if hasLibrary(t, admin) {
				t.Error("the library was loaded")
			}
			if got := cmdCalls(t, admin, "evalsha"); got < 7 {
				t.Errorf("EVALSHA ran %d times, want every call (7)", got)
			}
			if got := cmdCalls(t, admin, "eval"); got < 1 || !acquireScripted(t, admin) {
				t.Errorf("EVAL ran %d times, the acquire's script known %v: the NOSCRIPT fallback did not run", got, acquireScripted(t, admin))
			}
			// FCALL was tried once, when the node was new.
			if got := cmdCalls(t, admin, "fcall"); got > 1 {
				t.Errorf("FCALL ran %d times, want at most once", got)
			}
			if !functionsOff(n) {
				t.Error("the node is not remembered as without functions")
			}
		})
	}
}

func anys(s []string) []any {
	a := make([]any, len(s))
	for i, x := range s {
		a[i] = x
	}
	return a
}

// A node remembered without functions is tried again after
// noFunctionsFor: a server upgraded, or an ACL changed.
func TestNoFunctionsExpires(t *testing.T) {
	c, n := startWithoutFunctions(t)
	cycle(t, n, keys("off"), off, Ack{})
	noFCall(t, c)
	noFunctions.Store(n.Info().Addr, time.Now().Add(-time.Second))
	cycle(t, n, keys("on"), off, Ack{})
	if !hasLibrary(t, c) || cmdCalls(t, c, "fcall") == 0 {
		t.Fatal("FCALL not tried again after noFunctionsFor")
	}
	if functionsOff(n) || noFunctionsN.Load() != 0 {
		t.Error("the expired entry stays")
	}
}

// Two versions of the library (two client versions) live side by side on
// one node: loading one never replaces the other, and each client calls
// its own functions.
func TestLibraryVersionsSideBySide(t *testing.T) {
	forgetNoFunctions(t)
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	other := strings.ReplaceAll(librarySrc, libraryVersion, "0123456789abcdef")
	other = strings.Replace(other, "return {1, issue(", "return {1, 0 * issue(", 1)
	if err := c.FunctionLoad(ctx, other).Err(); err != nil {
		t.Fatal(err)
	}
	cycle(t, nodeOf(c), keys("mine"), off, Ack{})
	v, err := c.FCall(ctx, "redlock_0123456789abcdef_acquire", []string{"{x}", "{x}:fence", "{}:epoch"}, "v", 60000, 60000, 50, "0", 3600000, 0).Result()
	if err != nil || v.([]any)[1] != int64(0) {
		t.Fatalf("the other version's acquire: %v, %v", v, err)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "redlock_*"}).Result()
	if err != nil || len(libs) != 2 {
		t.Fatalf("libraries: %v, %v; want both", libs, err)
	}
}

// Under maxmemory (noeviction), the acquire's function answers as its
// script does: refused with OOM; a release (a script) still deletes; and
// an acquire's identity read, a function refused with it, is read again
// by EVAL (identified).
func TestLibraryUnderMaxmemory(t *testing.T) {
	forgetNoFunctions(t)
	c := redistest.Start(t, 1, redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	n := nodeOf(c)
	ctx := context.Background()
	tokens := map[string]int64{}
	for _, name := range []string{"fn", "script"} {
		k := keys("oom-" + name)
		a, err := Acquire(ctx, n, k, "mine", time.Minute, off, Ack{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = a.Token
	}
	const idKey = "{}:id"
	self, err := Identify(ctx, n, idKey)
	if err != nil {
		t.Fatal(err)
	}
	// Half the memory used: a buffer the server frees after the INFO
	// (a client's query buffer, under load) leaves it over the limit.
	used := redistest.MaxMemoryAtUsed(t, c)
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used/2, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	acq := AcquireCall(keys("new-id"), NewLockArgs(keys("new-id").Lock, "v"), time.Minute, off)
	if a, id, idErr, err := acq.AcquireIdentified(ctx, n, Ack{}, idKey); err == nil || !strings.HasPrefix(err.Error(), "OOM") || idErr != nil || id != self {
		t.Errorf("an acquire and its identity read under maxmemory: %+v, %+v, %v, %v; want OOM and identity %+v", a, id, idErr, err, self)
	}
	for _, name := range []string{"fn", "script"} {
		acq := AcquireCall(keys("new-"+name), NewLockArgs(keys("new-"+name).Lock, "v"), time.Minute, off)
		// The release retires the token with a SET, which maxmemory
		// refuses: it still deletes (release.lua).
		k := keys("oom-" + name)
		rel := ReleaseCall(NewLockArgs(k.Lock, "mine"), Retire{Fence: k.Fence, Token: tokens[name], Guard: off}, true, false)
		if name == "script" {
			acq = acq.scripted()
		}
		if a, err := acq.Acquire(ctx, n, Ack{}); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Errorf("%s: acquire under maxmemory: %+v, %v; want OOM", name, a, err)
		}
		if r, err := rel.Release(ctx, n); err != nil || !r.Deleted {
			t.Errorf("%s: release under maxmemory: %+v, %v; want deleted", name, r, err)
		}
	}
	if cmdCalls(t, c, "evalsha") == 0 || cmdCalls(t, c, "fcall") == 0 {
		t.Error("not both paths ran")
	}
}
