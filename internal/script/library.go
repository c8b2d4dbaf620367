package script

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/reply"
)

// The Redis Functions library (Redis 7 and later): the hot script, the
// plain lock's acquire, and what a Client's first obtain sends beside it
// in the same pipeline, the configuration record before it (RecordCall)
// and the identity read after it (identifyCall, which a first contact's
// Identify sends alone), as functions of a
// library that a node loads once
// (FUNCTION LOAD) and runs by name (FCALL). A script run
// with EVALSHA executes its whole chunk on every call, and the acquire's
// chunk defines the epoch guard's, the counter's and token.lua's helper
// functions before it runs its own body; a function library defines them
// once, when it is loaded, and FCALL runs the body alone. The bodies are
// the same .lua sources as the scripts', each wrapped in a function of
// (KEYS, ARGV): the semantics are the scripts' own (TestLibraryMatchesScripts).
// One helper keeps a value from call to call: runid.lua's run_id, the
// process's own, which a library loaded into another process (a restart,
// a replica) reads anew.
//
// Names and versions. A library's name is redlock_V and its functions'
// redlock_V_NAME (redlock_V_acquire), where V is the first 16 hex
// digits of the SHA-256 of the library's template (the source with the
// version left out), computed when the package initializes: FIPS 140 mode
// allows SHA-256, and no SHA-1 is computed. Function names are global on
// a node, across libraries, so the version is in every function's name.
// Two client versions whose libraries differ load two libraries side by
// side and never replace each other's (this package never uses FUNCTION
// LOAD REPLACE); two versions with the same library share it. A library
// stays on a node until an operator deletes it (FUNCTION DELETE): after
// upgrades, a node holds one small library per version that ever ran there.
//
// Loading. Nothing is loaded ahead of time: the first FCALL on a node that
// lacks the library (a new node; a restart without persistence; FUNCTION
// FLUSH; a replica promoted that never received the library, although
// FUNCTION LOAD is replicated and persisted like a write) answers that the
// function is not found; the call then loads the library, on every master
// of a Redis Cluster (each shard has its own), and sends the FCALL again.
// A library that exists already is not an error (another client loaded it
// first).
//
// Fallback. A node that cannot run functions (Redis 5 and 6; FCALL or
// FUNCTION renamed away; an ACL that refuses them) runs the scripts with
// EVALSHA as before. The node is remembered as such, by its Info().Addr,
// for noFunctionsFor, after which FCALL is tried again once (an upgrade, a
// changed ACL).
//
// Flags, and which scripts. A function that may write is refused as a
// whole under maxmemory (OOM) unless flagged allow-oom, which then lets
// every command through, and on a read-only replica; a script without
// flags runs until its first command that could raise memory use
// (DENYOOM) under OOM, or its first write on a replica. The acquire has no
// flags: every path of its script writes (SET NX, or the guard's SET or DEL
// of its fast-path key), so a replica refused it at that write as it
// refuses the function; under OOM the script failed at a DENYOOM command
// (SET NX, the guard's HSET or SET) before any write on every path but
// one, a node that recovers and had checked its identity, which answered
// Recovering and now answers OOM: no vote either way
// (TestLibraryUnderMaxmemory). The other scripts stay with EVALSHA, where
// nothing changes: the release, because on a read-only replica its script
// answers "not deleted" where the key is not ours, and under OOM deletes,
// which no set of flags keeps both (and its chunk defines two small
// helpers, retire.lua's and notify.lua's, whose making on every call is
// all a function would save); the refresh, whose PEXPIRE must
// work under OOM while its re-seed's SET must not; the others, which run
// once per acquire at most, until each is checked as the acquire was.

// libraryVersion is V, libraryName the library's name, librarySrc the
// source FUNCTION LOAD takes.
var libraryVersion, libraryName, librarySrc = buildLibrary()

// noFunctionsFor is how long a node that cannot run functions runs the
// scripts with EVALSHA before FCALL is tried on it again.
const noFunctionsFor = time.Minute

// libFunction is one function of the library: its name (the function is
// redlock_V_name), the script body it runs and its flags (Lua table items).
type libFunction struct {
	name, body, flags string
}

// libFunctions are the library's functions. The helpers the bodies need
// are defined once, before the bodies: those of the acquire's script,
// and run_id's (runid.lua), which the identity read's script carries.
func libFunctions() (helpers string, fns []libFunction) {
	return epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + runIDSrc, []libFunction{
		{"acquire", acquireSrc, ""},
		{"record", recordSrc, ""},
		{"identify", idSrc, ""},
	}
}

// acquireFn, recordFn and identifyFn are the FCALL heads of the acquire,
// the record and the identity read: "fcall" and the function's name.
var (
	acquireFn  = [2]any{"fcall", functionName("acquire")}
	recordFn   = [2]any{"fcall", functionName("record")}
	identifyFn = [2]any{"fcall", functionName("identify")}
)

// fnCall is a call of a function of the library for a pipeline beside
// another (Call.pipe): fn by FCALL, and eval the same call by EVAL of the
// function's script source, for a node that cannot run functions.
type fnCall struct{ fn, eval []any }

// functionName is the full name of the library's function name.
func functionName(name string) string { return libraryName + "_" + name }

// buildLibrary builds the library's source.
func buildLibrary() (version, name, src string) {
	const v = "@VERSION@"
	helpers, fns := libFunctions()
	var b strings.Builder
	b.WriteString("#!lua name=redlock_" + v + "\n")
	b.WriteString("-- redlock's scripts as Redis Functions (internal/script/library.go)\n")
	b.WriteString(helpers)
	for _, f := range fns {
		b.WriteString("\nlocal function " + f.name + "(KEYS, ARGV)\n" + f.body + "\nend\n")
	}
	for _, f := range fns {
		b.WriteString("redis.register_function{function_name='redlock_" + v + "_" + f.name + "', callback=" + f.name + ", flags={" + f.flags + "}}\n")
	}
	h := sha256.Sum256([]byte(b.String()))
	version = hex.EncodeToString(h[:8])
	return version, "redlock_" + version, strings.ReplaceAll(b.String(), v, version)
}

// fnOutcome classifies an FCALL's error.
type fnOutcome int

const (
	fnRan         fnOutcome = iota // the function ran (or the node failed): its result stands
	fnMissing                      // the node lacks the function: load it
	fnUnsupported                  // the node cannot run FCALL: EVALSHA
)

// classify tells apart the FCALL errors after which the function did not
// run. Only the errors that name FCALL itself or the missing function
// count: an error of a command the function called (a NOPERM for INFO,
// say) is the function's result, since the function may have written
// before it, and running the script again would run it twice.
func classify(err error) fnOutcome {
	if err == nil || !driver.IsReply(err) {
		return fnRan
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "ERR Function not found"):
		return fnMissing
	case strings.HasPrefix(msg, "ERR unknown command"):
		// Redis 6: "ERR unknown command `FCALL`, with args beginning
		// with: ..."; 7: "ERR unknown command 'fcall', ...".
		if c := strings.ToLower(msg[len("ERR unknown command"):]); strings.HasPrefix(c, " `fcall`") || strings.HasPrefix(c, " 'fcall'") {
			return fnUnsupported
		}
	case strings.HasPrefix(msg, "NOPERM"):
		// "NOPERM this user has no permissions to run the 'fcall'
		// command" (7.0); "NOPERM User u has no permissions to run the
		// 'fcall' command" (7.2).
		if strings.Contains(strings.ToLower(msg), "'fcall' command") {
			return fnUnsupported
		}
	}
	return fnRan
}

// noFunctions are the nodes (by Info().Addr) that could not run FCALL,
// with the time to try again; noFunctionsN counts them, so that the common
// case (none) reads one atomic.
var (
	noFunctions  sync.Map // string -> time.Time
	noFunctionsN atomic.Int64
)

// functionsOff reports whether n was found unable to run functions less
// than noFunctionsFor ago.
func functionsOff(n driver.Node) bool {
	if noFunctionsN.Load() == 0 {
		return false
	}
	addr := n.Info().Addr
	until, ok := noFunctions.Load(addr)
	if !ok {
		return false
	}
	if time.Now().Before(until.(time.Time)) {
		return true
	}
	if noFunctions.CompareAndDelete(addr, until) {
		noFunctionsN.Add(-1)
	}
	return false
}

// setFunctionsOff remembers that n cannot run functions.
func setFunctionsOff(n driver.Node) {
	if _, loaded := noFunctions.Swap(n.Info().Addr, time.Now().Add(noFunctionsFor)); !loaded {
		noFunctionsN.Add(1)
	}
}

// loadLibrary loads the library on n: on each master of a Redis Cluster,
// else on the node. A library that exists already counts as loaded. It
// returns fnUnsupported when a server refused FUNCTION LOAD (no such
// command, an ACL), and a node's failure as an error (the caller then runs
// the script with EVALSHA, this once).
func loadLibrary(ctx context.Context, n driver.Node) (fnOutcome, error) {
	targets := []driver.Node{n}
	if n.Info().Sharded {
		masters, err := n.Masters(ctx)
		if err != nil {
			return fnRan, err
		}
		if len(masters) > 0 {
			targets = masters
		}
	}
	for _, m := range targets {
		_, err := m.Do(ctx, "FUNCTION", "LOAD", librarySrc)
		switch {
		case err == nil, reply.HasPrefix(err, "ERR Library '"+libraryName+"' already exists"):
		case driver.IsReply(err):
			return fnUnsupported, nil
		default:
			return fnRan, err
		}
	}
	return fnMissing, nil
}

// withLibrary sends a call built for FCALL with send, which returns the
// error its FCALL ended with (a reply's error, or the transport's), and
// loads the library and sends again where the node lacks it. ok is false
// when the node cannot run the function, which then did not run: the
// caller runs the script with EVALSHA. Every other outcome, an error
// included, is the call's: the function may have run.
func withLibrary(ctx context.Context, n driver.Node, send func() error) (ok bool) {
	if functionsOff(n) {
		return false
	}
	switch classify(send()) {
	case fnRan:
		return true
	case fnUnsupported:
		setFunctionsOff(n)
		return false
	}
	switch out, lerr := loadLibrary(ctx, n); {
	case lerr != nil:
		// The load failed on the way (a Cluster master that did not
		// answer): EVALSHA, this once, on the node that answered.
		return false
	case out == fnUnsupported:
		setFunctionsOff(n)
		return false
	}
	// Still missing (a Cluster's slot moved to a master that the load did
	// not reach): EVALSHA, this once.
	return classify(send()) == fnRan
}

// fcall runs a call built for FCALL (args[0] "fcall") on n, as
// withLibrary says.
func fcall(ctx context.Context, n driver.Node, args []any) (v any, err error, ok bool) {
	ok = withLibrary(ctx, n, func() error {
		v, err = n.Do(ctx, args...)
		return err
	})
	if !ok {
		return nil, nil, false
	}
	return v, err, true
}

// fpipe runs in one pipeline a call built for FCALL, cmds[at], and the
// commands around it (a record before it, WAIT and id.lua after), as
// withLibrary says: when ok is false, neither the function nor the
// commands after it ran (those before it did).
func fpipe(ctx context.Context, n driver.Node, cmds [][]any, at int) (replies []driver.Reply, err error, ok bool) {
	ok = withLibrary(ctx, n, func() error {
		if replies, err = n.Pipe(ctx, cmds); err != nil {
			return err
		}
		return replies[at].Err
	})
	if !ok {
		return nil, nil, false
	}
	if err != nil {
		return nil, err, true
	}
	return replies, nil, true
}
