package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

const (
	// Fresh test nodes would recover for --max-ttl under the restart guard.
	noGuard = "--restart-guard=off"
	// Short TTLs have short per-node timeouts: on a loaded machine a first
	// attempt can miss them, so tests that expect the lock retry.
	wait = "--wait=5s"
)

func TestMain(m *testing.M) {
	// The guardian of a run that a test runs in this process.
	if run, ok := isGuardian(); ok {
		os.Exit(guardianMain(run, os.Stdin, os.Stderr))
	}
	if os.Getenv(envBurn) != "" {
		burnCPU(os.Getenv(envBurn))
		return
	}
	redis.SetLogger(quietLogger{})
	// The demo kills a node: go-redis then redials it from a goroutine of
	// its own pool, which sleeps up to a second and ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is what one run of the program printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runCLI runs the program with args, as main would, and returns what it
// printed.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := run(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// startCLI runs the program in the background; wait returns its result.
func startCLI(t *testing.T, args ...string) (stdout *syncBuffer, wait func() result) {
	t.Helper()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), args, &out, &errb) }()
	var once sync.Once
	var res result
	wait = func() result {
		once.Do(func() {
			select {
			case code := <-done:
				res = result{code, out.String(), errb.String()}
			case <-time.After(30 * time.Second):
				t.Fatalf("redlock %v did not return in 30s\nstdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
			}
		})
		return res
	}
	t.Cleanup(func() { wait() })
	return &out, wait
}

// waitFor polls cond every 10 ms until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodesFlag is the --nodes value for servers.
func nodesFlag(servers ...*redistest.Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	return strings.Join(urls, ",")
}

// holdLock obtains name on servers from a separate library client, as
// another process would, and releases it when the test ends.
func holdLock(t *testing.T, name string, ttl time.Duration, servers ...*redistest.Server) *redlock.Lock {
	t.Helper()
	return holdLockWith(t, name, ttl, (*redlock.Client).Mutex, servers...)
}

// holdLockWith is holdLock with a handle of another kind: a lock of the
// family.
func holdLockWith(t *testing.T, name string, ttl time.Duration, handle func(c *redlock.Client, name string) redlock.Locker, servers ...*redistest.Server) *redlock.Lock {
	t.Helper()
	nodes := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		rc := s.Client()
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Obtain, not TryObtain: a loaded machine can miss a short per-node
	// timeout once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := handle(c, name).Obtain(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Obtain returns at quorum; the other nodes' yes lands just after.
	// Wait for it (up to 2 s, best effort: a test may hold a node down), so
	// that what inspect sees does not depend on that race.
	key := "{" + limits.Prefix + name + "}"
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		all := true
		for _, n := range nodes {
			if n.Exists(ctx, key).Val() != 1 {
				all = false
				break
			}
		}
		if all {
			break
		}
	}
	return l
}

func TestHelpShowsEveryDefault(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.name, "--help")
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: redlock "+c.name) {
				t.Fatalf("--help: %v", r)
			}
			// Every flag is listed, each followed by its default.
			blocks := strings.Split(r.stdout, "\n  --")[1:]
			if len(blocks) == 0 {
				t.Fatalf("no flags listed:\n%s", r.stdout)
			}
			for _, b := range blocks {
				if !strings.Contains(b, "(default") {
					t.Errorf("flag --%s has no default in --help", strings.Fields(b)[0])
				}
			}
			if r2 := runCLI(t, "help", c.name); r2.stdout != r.stdout {
				t.Errorf("redlock help %s differs from redlock %s --help", c.name, c.name)
			}
		})
	}
	if r := runCLI(t); r.code != exitUsage || !strings.Contains(r.stdout, "Commands:") {
		t.Errorf("no arguments: %v", r)
	}
	if r := runCLI(t, "frobnicate"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %v", r)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// reader and owner make the handles of the lock family for holdLockWith.
func reader(c *redlock.Client, name string) redlock.Locker { r, _ := c.RWMutex(name); return r }

func owner(id string) func(c *redlock.Client, name string) redlock.Locker {
	return func(c *redlock.Client, name string) redlock.Locker { return c.Reentrant(name, id) }
}

// TestVersion: "redlock --version" and "redlock version" print the
// build's version from its build information (C4 of issue 49); a binary
// built from the checkout names its commit when the build recorded one.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version", "-version"} {
		r := runCLI(t, arg)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "redlock ") || !strings.Contains(r.stdout, "built with go") {
			t.Errorf("redlock %s: %v", arg, r)
		}
	}
	if r := runCLI(t, "version", "extra"); r.code != exitUsage {
		t.Errorf("redlock version extra: want exit %d: %v", exitUsage, r)
	}
	// The commit is stamped where the build records it: -buildvcs=true in
	// a git clone (not a worktree, where go build records none).
	bin := filepath.Join(t.TempDir(), "redlock")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("redlock --version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "library ") {
		t.Errorf("redlock --version names no library version:\n%s", out)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`vcs\.revision=([0-9a-f]+)`).FindSubmatch(info); m != nil && !strings.Contains(string(out), "commit "+string(m[1])) {
		t.Errorf("the build info has commit %s, but redlock --version does not name it:\n%s", m[1], out)
	}
	// A build stamped as the Kubernetes example's Dockerfile stamps it.
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3-test", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -X: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "redlock v1.2.3-test\n") {
		t.Errorf("a build stamped v1.2.3-test says %q (%v)", out, err)
	}
}
