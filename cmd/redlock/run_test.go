//go:build unix

// The tests of redlock run start shell commands and send Unix signals.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

func TestRunPassesEnvironmentAndStatus(t *testing.T) {
	servers := redistest.Start(t, 3)
	t.Setenv(envNodes, nodesFlag(servers...))
	r := runCLI(t, "run", noGuard, wait, "--ttl", "2s", "job:1", "--",
		"sh", "-c", `echo "name=$REDLOCK_NAME held=$REDLOCK_HELD token=${REDLOCK_TOKEN-unset} nodes=${REDLOCK_NODES-unset}"; exit 3`)
	if r.code != 3 {
		t.Fatalf("want the command's status 3: %v", r)
	}
	var token int64
	if _, err := fmt.Sscanf(r.stdout, "name=job:1 held=1 token=%d nodes=unset\n", &token); err != nil || token <= 0 {
		t.Errorf("stdout %q, want the name, held=1, a positive fencing token, and no node list: %v", r.stdout, err)
	}
	// The lock was released when the command exited.
	if r := runCLI(t, "inspect", "job:1"); !strings.Contains(r.stdout, "free on every node") {
		t.Errorf("lock not released: %v", r)
	}

	// Without "--", and a command killed by a signal reports 128+N.
	r = runCLI(t, "run", noGuard, wait, "job:2", "sh", "-c", "kill -USR1 $$")
	if r.code != 128+int(syscall.SIGUSR1) {
		t.Errorf("killed by SIGUSR1: %v", r)
	}
}

func TestRunCommandNotFound(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	if r := runCLI(t, "run", noGuard, wait, nodes, "job", "--", "no-such-command-xyz"); r.code != exitNotFound {
		t.Errorf("missing command: %v", r)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "noexec")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "run", noGuard, wait, nodes, "job", "--", script); r.code != exitCannotExec {
		t.Errorf("command not executable: %v", r)
	}
}

func TestRunNotObtainedInTime(t *testing.T) {
	servers := redistest.Start(t, 3)
	holdLock(t, "busy", 10*time.Second, servers...)
	nodes := "--nodes=" + nodesFlag(servers...)
	marker := filepath.Join(t.TempDir(), "ran")

	start := time.Now()
	r := runCLI(t, "run", noGuard, nodes, "--wait", "300ms", "busy", "--", "touch", marker)
	if r.code != exitNotObtained || !strings.Contains(r.stderr, "not obtained within 300ms") {
		t.Errorf("--wait 300ms: %v", r)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("returned after %v, want about 300ms", d)
	}
	r = runCLI(t, "run", noGuard, nodes, "busy", "--", "touch", marker)
	if r.code != exitNotObtained || !strings.Contains(r.stderr, "held by another owner") {
		t.Errorf("one attempt: %v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without the lock")
	}
}

func TestRunUnreachableNodes(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...) + ",redis://" + closedAddr(t) + ",redis://" + closedAddr(t)
	r := runCLI(t, "run", noGuard, "--timeout", "500ms", nodes, "job", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "1 of 3 nodes answered, 2 needed") {
		t.Errorf("two of three nodes down: %v", r)
	}
}

// closedAddr is a loopback address nothing listens on.
func TestRunLockLost(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		sigkill bool
	}{
		{"stops on SIGTERM", `echo started; exec sleep 30`, false},
		{"killed after grace", `trap "" TERM; echo started; sleep 30; echo survived`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := redistest.Start(t, 3)
			out, done := startCLI(t, "run", noGuard, wait, "--nodes", nodesFlag(servers...),
				"--ttl", "1s", "--grace", "300ms", "lost", "--", "sh", "-c", tt.script)
			waitFor(t, "the command to start", func() bool { return strings.Contains(out.String(), "started") })
			// Freeze a majority: no refresh can be confirmed.
			for _, s := range servers[:2] {
				if err := s.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			r := done()
			if r.code != exitLost {
				t.Fatalf("want exit %d (lock lost): %v", exitLost, r)
			}
			if !strings.Contains(r.stderr, "sending SIGTERM") || strings.Contains(r.stderr, "SIGKILL\n") != tt.sigkill {
				t.Errorf("stderr does not tell the story (want SIGKILL %v):\n%s", tt.sigkill, r.stderr)
			}
			if strings.Contains(r.stdout, "survived") {
				t.Error("the command went on after the lock was lost")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v after the freeze to stop the command", d)
			}
		})
	}
}

func TestRunForwardsSignals(t *testing.T) {
	servers := redistest.Start(t, 1)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ready := filepath.Join(t.TempDir(), "ready")
			script := `trap 'echo "got signal"; exit 7' TERM INT; touch "$1"; while :; do sleep 0.02; done`
			_, done := startCLI(t, "run", noGuard, wait, "--nodes", nodesFlag(servers...), "sig", "--", "sh", "-c", script, "sh", ready)
			waitFor(t, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			r := done()
			if r.code != 7 || !strings.Contains(r.stdout, "got signal") {
				t.Errorf("want the command to handle the forwarded %v and exit 7: %v", sig, r)
			}
		})
	}
}

// TestRunSharedAndExclusive runs two readers that hold NAME at once, then a
// writer that waits until both have ended.
func TestRunSharedAndExclusive(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := nodesFlag(servers...)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	exists := func(name string) bool { _, err := os.Stat(file(name)); return err == nil }
	// A reader says it is in, then stays in until the test says "go"
	// (10 s at most), and appends to the log as it leaves.
	reader := `touch "$1"; i=0; while [ ! -e "$2" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; echo reader >> "$3"`
	_, doneA := startCLI(t, "run", noGuard, wait, "--nodes", nodes, "--shared", "data", "--",
		"sh", "-c", reader, "sh", file("a"), file("go"), file("log"))
	_, doneB := startCLI(t, "run", noGuard, wait, "--nodes", nodes, "--shared", "data", "--",
		"sh", "-c", reader, "sh", file("b"), file("go"), file("log"))
	waitFor(t, "both readers to hold the lock at once", func() bool { return exists("a") && exists("b") })

	_, doneW := startCLI(t, "run", noGuard, "--wait", "20s", "--nodes", nodes, "--exclusive", "data", "--",
		"sh", "-c", `echo writer >> "$1"`, "sh", file("log"))
	time.Sleep(300 * time.Millisecond)
	if exists("log") {
		t.Error("the writer or a reader ran on before the readers were let go")
	}
	if err := os.WriteFile(file("go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, done := range []func() result{doneA, doneB, doneW} {
		if r := done(); r.code != 0 {
			t.Errorf("want exit 0: %v", r)
		}
	}
	log, err := os.ReadFile(file("log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(log) != "reader\nreader\nwriter\n" {
		t.Errorf("log %q: want both readers to end before the writer ran", log)
	}
	// The lock was released by all three.
	if r := runCLI(t, "inspect", "--nodes", nodes, "data"); !strings.Contains(r.stdout, "free on every node") {
		t.Errorf("lock not released: %v", r)
	}
}

// TestRunOwner takes a reentrant lock that another holder of the same owner
// already holds, and is refused under another owner or as a reader.
func TestRunOwner(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := "--nodes=" + nodesFlag(servers...)
	held := holdLockWith(t, "job", 10*time.Second, owner("run-42"), servers...)
	r := runCLI(t, "run", noGuard, wait, nodes, "--owner", "run-42", "job", "--", "sh", "-c", `echo "token=$REDLOCK_TOKEN"`)
	if r.code != 0 || r.stdout != fmt.Sprintf("token=%d\n", held.Token()) {
		t.Errorf("re-entry by the same owner: want exit 0 and the holder's token %d: %v", held.Token(), r)
	}
	for _, args := range [][]string{{"--owner", "run-43"}, {"--shared"}, {"--exclusive"}} {
		args = append(append([]string{"run", noGuard, nodes}, args...), "job", "--", "true")
		if r := runCLI(t, args...); r.code != exitNotObtained || !strings.Contains(r.stderr, "held by another owner") {
			t.Errorf("redlock %q: want exit %d, held by another owner: %v", args, exitNotObtained, r)
		}
	}
	// A plain lock and the family never share a name: no wait, exit 75.
	holdLock(t, "plain", 10*time.Second, servers...)
	start := time.Now()
	r = runCLI(t, "run", noGuard, nodes, "--wait", "5s", "--shared", "plain", "--", "true")
	if r.code != exitNotObtained || !strings.Contains(r.stderr, "another kind") {
		t.Errorf("--shared on a plain lock: want exit %d and the kind error: %v", exitNotObtained, r)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("--shared on a plain lock waited %v", d)
	}
}

func TestRunUsageErrors(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	t.Setenv(envNodes, "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "missing lock NAME"},
		{[]string{"run", nodes, "job"}, "missing COMMAND"},
		{[]string{"run", nodes, "job", "--ttl", "5s"}, "missing COMMAND"},
		{[]string{"run", nodes, "job", "--bogus", "--", "true"}, "unknown flag --bogus"},
		{[]string{"inspect", nodes, "a", "b"}, "exactly one lock NAME"},
		{[]string{"run", "--", "true"}, `redlock run: missing lock NAME before "--"`},
		{[]string{"run", nodes, "--ttl=2s", "--", "true"}, `missing lock NAME before "--"`},
		{[]string{"run", "--bogus", "job", "--", "true"}, "redlock run: unknown flag --bogus\n"},
		{[]string{"run", "--ttl", "soon", "job", "--", "true"}, `redlock run: --ttl "soon": time: invalid duration "soon"` + "\n"},
		{[]string{"run", "--ttl"}, "redlock run: flag --ttl needs a value\n"},
		{[]string{"run", "--shared=maybe", "job", "--", "true"}, `--shared "maybe": strconv.ParseBool: parsing "maybe": invalid syntax`},
		{[]string{"demo", "--stock", "many"}, `redlock demo: --stock "many": strconv.ParseInt: parsing "many": invalid syntax`},
		{[]string{"run", nodes, noGuard, "", "--", "true"}, "redlock run: invalid argument: empty lock name\n"},
		{[]string{"run", "job", "--", "true"}, "no nodes: give --nodes or set REDLOCK_NODES"},
		{[]string{"run", nodes, "--ttl", "5ms", "job", "--", "true"}, "below the minimum"},
		{[]string{"run", nodes, "--ttl", "2m", "job", "--", "true"}, "above --max-ttl"},
		{[]string{"run", nodes, "--ttl", "2s", "--grace", "2s", "job", "--", "true"}, "shorter than --ttl"},
		{[]string{"run", nodes, "--wait", "-1s", "job", "--", "true"}, "must not be negative"},
		{[]string{"run", nodes, "--restart-guard", "maybe", "job", "--", "true"}, "want on, persistent or off"},
		{[]string{"run", nodes, "--shared", "--exclusive", "job", "--", "true"}, "--shared and --exclusive exclude each other"},
		{[]string{"run", nodes, "--owner", "me", "--shared", "job", "--", "true"}, "--shared and --owner exclude each other"},
		{[]string{"run", nodes, "--owner", "me", "--exclusive", "job", "--", "true"}, "--exclusive and --owner exclude each other"},
		{[]string{"run", nodes, "--owner", "", "job", "--", "true"}, "empty owner ID"},
		{[]string{"run", "--nodes", "localhost:6379", "job", "--", "true"}, "not a URL"},
		{[]string{"run", "--nodes", "redis://a:1,redis://a:1", noGuard, "job", "--", "true"}, "same address"},
		{[]string{"inspect", nodes}, "exactly one lock NAME"},
		{[]string{"inspect", "--nodes", "ftp://x", "name"}, "unknown scheme"},
		{[]string{"doctor", "--drift", "0.7", nodes}, "outside [0, 0.5)"},
		{[]string{"doctor", nodes, "extra"}, "unexpected argument"},
		{[]string{"bench", "--scenarios", "fast"}, "unknown scenario"},
		{[]string{"bench", "--parallel", "0"}, "at least one worker"},
	}
	for _, tt := range tests {
		r := runCLI(t, tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("redlock %q: want exit %d and %q: %v", tt.args, exitUsage, tt.want, r)
		}
		// The line names the command; the library's own "redlock: " is
		// not repeated after it, and a flag has two dashes.
		if strings.Contains(r.stderr, ": redlock: ") || regexp.MustCompile(`(^|\s)-[a-z]`).MatchString(r.stderr) {
			t.Errorf("redlock %q: %q", tt.args, r.stderr)
		}
	}
}

// TestFlagsAfterName: flags are taken after the lock name too (C7 of
// issue 49), up to the "--" or the first word that is not a flag, which
// begins the command with its own flags.
func TestFlagsAfterName(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	for _, args := range [][]string{
		{"run", nodes, "job", "--ttl", "4s", noGuard, "--", "sh", "-c", `echo "$REDLOCK_NAME" "$0"`, "x"},
		{"run", "job", nodes, "--ttl=4s", noGuard, "sh", "-c", `echo "$REDLOCK_NAME" "$0"`, "x"},
		{"run", noGuard, nodes, "job", "sh", "-c", `echo "$REDLOCK_NAME" "$0"`, "x", "--ttl", "1ms"},
	} {
		if r := runCLI(t, args...); r.code != 0 || r.stdout != "job x\n" {
			t.Errorf("redlock %q: want exit 0 and \"job x\": %v", args, r)
		}
	}
	if r := runCLI(t, "inspect", "job", nodes, "--json"); r.code != 0 || !strings.HasPrefix(r.stdout, "{") {
		t.Errorf("inspect NAME --json: want JSON: %v", r)
	}
}

// The flags end at the first argument that is not a flag, or at a "--"
// that is not a flag's value.
func TestEndedByDashes(t *testing.T) {
	fs := newFlagSet("t")
	fs.Bool("shared", false, "")
	fs.String("owner", "", "")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--", "true"}, true},
		{[]string{"--shared", "--", "true"}, true},
		{[]string{"--shared=true", "--", "true"}, true},
		{[]string{"--owner", "me", "--", "true"}, true},
		{[]string{"--owner=me", "--", "true"}, true},
		{[]string{"--owner", "--", "job", "--", "true"}, false}, // "--" is the owner
		{[]string{"job", "--", "true"}, false},
		{[]string{"--shared", "job", "--", "true"}, false},
		{[]string{"-", "--", "true"}, false},
		{nil, false},
	} {
		if got := endedByDashes(fs, tc.args); got != tc.want {
			t.Errorf("endedByDashes(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestChildEnv(t *testing.T) {
	env := childEnv([]string{"PATH=/bin", envPassword + "=pw", envNodes + "=redis://:pw@a:1", "REDLOCK_HELD=0", "HOME=/root"}, "n", "42")
	want := []string{"PATH=/bin", "HOME=/root", "REDLOCK_NAME=n", "REDLOCK_TOKEN=42", "REDLOCK_HELD=1"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("childEnv = %q, want %q", env, want)
	}
}

// TestBadDatabaseIndex: a database index that the servers do not have
// (/99 with the default 16 databases) is a configuration error, exit 2,
// not unreachable nodes (C6 of issue 49).
func TestBadDatabaseIndex(t *testing.T) {
	servers := redistest.Start(t, 3)
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr() + "/99"
	}
	nodes := "--nodes=" + strings.Join(urls, ",")
	for _, args := range [][]string{
		{"run", nodes, noGuard, "job", "--", "true"},
		{"inspect", nodes, "job"},
	} {
		r := runCLI(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "database") || strings.Contains(r.stderr, "unreachable") {
			t.Errorf("redlock %s with /99: want exit %d naming the database index: %v", args[0], exitUsage, r)
		}
	}
	if r := runCLI(t, "doctor", nodes); r.code != exitUsage || !strings.Contains(r.stdout, "configuration error") {
		t.Errorf("doctor with /99: want the reachable check to name a configuration error: %v", r)
	}
}

// TestRunOneFrozenNode: with one node of five frozen (SIGSTOP) and
// --timeout 20s, run starts its command as soon as a quorum answered,
// not when the frozen node's PING ends (C1 of issue 49). How long that
// PING takes is measured beside it, on a client opened as run opens its
// nodes: go-redis gives up on the connection's handshake after its own
// read timeout (5 s), before --timeout.
func TestRunOneFrozenNode(t *testing.T) {
	servers := redistest.Start(t, 5)
	if err := servers[4].Pause(); err != nil {
		t.Fatal(err)
	}
	pinged := make(chan time.Duration, 1)
	go func() {
		specs, err := parseNodes("redis://" + servers[4].Addr())
		if err != nil {
			pinged <- 0
			return
		}
		rc := specs[0].open(20 * time.Second)
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		t0 := time.Now()
		_ = rc.Ping(ctx).Err()
		pinged <- time.Since(t0)
	}()
	start := time.Now()
	out, done := startCLI(t, "run", "--nodes", nodesFlag(servers...), noGuard, wait, "--timeout", "20s", "frozen-one", "--", "sh", "-c", "echo started")
	waitFor(t, "the command to start", func() bool { return out.String() == "started\n" })
	started := time.Since(start)
	if r := done(); r.code != 0 {
		t.Fatalf("want exit 0: %v", r)
	}
	frozen := <-pinged
	if started >= frozen/2 {
		t.Errorf("the command started %v after run, and a PING of the frozen node took %v: run waited for the frozen node", started, frozen)
	}
}

// TestRunSaysItWaitsForRecoveringNodes: on nodes just started, the
// restart guard refuses every lock for the max TTL; run --wait says so at
// once, and runs the command once they vote (issue 49, the silent first
// minute).
func TestRunSaysItWaitsForRecoveringNodes(t *testing.T) {
	servers := redistest.Start(t, 3)
	out, done := startCLI(t, "run", "--nodes", nodesFlag(servers...), "--max-ttl", "2s", "--ttl", "1s", "--wait", "20s", "fresh", "--", "sh", "-c", "echo held")
	r := done()
	if r.code != 0 || out.String() != "held\n" {
		t.Fatalf("want the command run once the nodes vote: %v", r)
	}
	if !strings.Contains(r.stderr, "redlock run: waiting up to --wait 20s for the lock:") || !strings.Contains(r.stderr, "recovering") {
		t.Errorf("run waited for recovering nodes without saying so: %v", r)
	}
}
