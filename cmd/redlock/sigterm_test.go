//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// An evicted holder (docs/kubernetes.md): Kubernetes sends SIGTERM to a
// Pod's containers' main processes, and SIGKILL once
// terminationGracePeriodSeconds (30 s by default) have passed. The
// process holding a lock must release it before it exits, or the lock
// stays taken on the nodes until its TTL runs out.

// evictionGrace bounds how long the holder may take from SIGTERM to exit:
// Kubernetes's default terminationGracePeriodSeconds. The holders here
// take well under a second on an idle machine.
const evictionGrace = 30 * time.Second

// envHolder makes the test binary a library holder (TestSIGTERMHolder)
// that obtains the lock it names on the nodes of REDLOCK_NODES.
const envHolder = "REDLOCK_TEST_SIGTERM_HOLDER"

// TestRunReleasesOnSIGTERM: a SIGTERM to "redlock run" (the built
// binary, as a container's main process) reaches the command's process
// group, and run releases the lock once the command has exited, before it
// exits itself: the lock's key is gone from every node when the process
// is gone, though its TTL had most of its 30 s left.
func TestRunReleasesOnSIGTERM(t *testing.T) {
	servers := redistest.Start(t, 3)
	bin := buildCLI(t)
	for _, c := range []struct {
		name, script string
		want         int
	}{
		// The command dies of the SIGTERM: run exits 128+15.
		{"command killed", `touch "$1"; exec sleep 300`, 128 + int(syscall.SIGTERM)},
		// The command handles it and cleans up for a moment first.
		{"command cleans up", `trap 'sleep 0.3; exit 3' TERM; touch "$1"; while :; do sleep 0.02; done`, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "evicted-" + strings.ReplaceAll(c.name, " ", "-")
			ready := filepath.Join(t.TempDir(), "ready")
			cmd := exec.Command(bin, "run", noGuard, wait, "--ttl", "30s", "--nodes", nodesFlag(servers...),
				name, "--", "sh", "-c", c.script, "sh", ready)
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := waitProcess(t, cmd)
			waitFor(t, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
			// An obtain returns at a quorum: the last node's acquire may
			// land a moment later. The release must then find it on all.
			waitFor(t, "the lock's key on every node while the command runs", func() bool { return heldOn(t, name, servers) == len(servers) })
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err := awaitExit(t, exited, evictionGrace, &out)
			if got := exitCode(err); got != c.want {
				t.Errorf("exit status %d (%v), want %d\n%s", got, err, c.want, out.String())
			}
			if n := heldOn(t, name, servers); n != 0 {
				t.Errorf("the lock's key is still on %d of %d nodes after redlock run exited on SIGTERM\n%s", n, len(servers), out.String())
			}
		})
	}
}

// TestClientCloseReleasesOnSIGTERM: an application that holds a lock
// (WithAutoRefresh) and calls Client.Close when SIGTERM arrives, as
// docs/kubernetes.md tells, has released it by the time it exits.
func TestClientCloseReleasesOnSIGTERM(t *testing.T) {
	servers := redistest.Start(t, 3)
	name := "evicted-library"
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGTERMHolder$")
	cmd.Env = append(os.Environ(), envHolder+"="+name, "REDLOCK_TEST_READY="+ready, envNodes+"="+nodesFlag(servers...))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := waitProcess(t, cmd)
	waitFor(t, "the holder to obtain the lock", func() bool { _, err := os.Stat(ready); return err == nil })
	// An obtain returns at a quorum: the last node's acquire may land a
	// moment later. The release must then find it on all.
	waitFor(t, "the lock's key on every node while the holder runs", func() bool { return heldOn(t, name, servers) == len(servers) })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := awaitExit(t, exited, evictionGrace, &out); err != nil {
		t.Errorf("the holder failed: %v\n%s", err, out.String())
	}
	if n := heldOn(t, name, servers); n != 0 {
		t.Errorf("the lock's key is still on %d of %d nodes after the holder exited on SIGTERM\n%s", n, len(servers), out.String())
	}
}

// TestSIGTERMHolder is the holder process of
// TestClientCloseReleasesOnSIGTERM: it obtains the lock with automatic
// refresh, says so by creating the ready file, waits for SIGTERM and
// closes its Client, which releases the lock. Without envHolder it is
// skipped.
func TestSIGTERMHolder(t *testing.T) {
	name := os.Getenv(envHolder)
	if name == "" {
		t.Skip("the holder process of TestClientCloseReleasesOnSIGTERM")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var nodes []redis.UniversalClient
	for _, u := range strings.Split(os.Getenv(envNodes), ",") {
		opts, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		opts.ContextTimeoutEnabled = true
		rc := redis.NewClient(opts)
		defer rc.Close()
		nodes = append(nodes, rc)
	}
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lock, err := c.Mutex(name).Obtain(octx, 30*time.Second, redlock.WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("REDLOCK_TEST_READY"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done(): // SIGTERM
	case <-lock.Done():
		t.Fatalf("lock lost before SIGTERM: %v", lock.Err())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// process is a child process waited for in the background; it is
// killed if the test ends first.
type process struct {
	done chan struct{} // closed when the process has been waited for
	err  error         // cmd.Wait's, once done is closed
}

func waitProcess(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// awaitExit returns the process's exit error, failing the test if it
// has not exited within limit.
func awaitExit(t *testing.T, p *process, limit time.Duration, out fmt.Stringer) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(limit):
		t.Fatalf("the process did not exit within %v of SIGTERM\n%s", limit, out)
		return nil
	}
}

// exitCode is the exit status of a process that ended with err.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// heldOn counts the servers that have the key of lock name (default
// prefix).
func heldOn(t *testing.T, name string, servers []*redistest.Server) int {
	t.Helper()
	key, err := keys.Layout{Prefix: limits.Prefix}.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range servers {
		rc := s.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := rc.Exists(ctx, key).Result()
		cancel()
		_ = rc.Close()
		if err != nil {
			t.Fatalf("EXISTS %s on %s: %v", key, s.Addr(), err)
		}
		n += int(v)
	}
	return n
}

// TestRunGraceBoundsSIGTERM: a command (and a process it left in its
// group) that ignores SIGTERM is killed --grace after a SIGTERM to
// redlock run, which then releases the lock and exits (R2 of issue 49):
// the bound that a Pod's terminationGracePeriodSeconds needs, whatever
// the command does with the signal.
func TestRunGraceBoundsSIGTERM(t *testing.T) {
	servers := redistest.Start(t, 3)
	bin := buildCLI(t)
	const grace = time.Second
	dir := t.TempDir()
	ready, pidFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pid")
	name := "grace-bounds-sigterm"
	// SIGTERM is ignored by the shell and, inherited, by both sleeps.
	script := `trap "" TERM; sleep 300 & echo $! > "$2"; touch "$1"; exec sleep 300`
	cmd := exec.Command(bin, "run", noGuard, wait, "--ttl", "30s", "--grace", grace.String(), "--nodes", nodesFlag(servers...),
		name, "--", "sh", "-c", script, "sh", ready, pidFile)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := waitProcess(t, cmd)
	waitFor(t, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
	waitFor(t, "the lock's key on every node", func() bool { return heldOn(t, name, servers) == len(servers) })
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := awaitExit(t, exited, evictionGrace, &out)
	took := time.Since(start)
	if got := exitCode(err); got != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d (%v), want %d (the command killed)\n%s", got, err, 128+int(syscall.SIGKILL), out.String())
	}
	if took < grace {
		t.Errorf("run exited %v after SIGTERM, before --grace %v had passed\n%s", took, grace, out.String())
	}
	if !strings.Contains(out.String(), "outlived --grace") {
		t.Errorf("run did not say why it killed the command:\n%s", out.String())
	}
	if n := heldOn(t, name, servers); n != 0 {
		t.Errorf("the lock's key is still on %d of %d nodes after run exited\n%s", n, len(servers), out.String())
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || alive(pid) {
		t.Errorf("the group's other process %d outlived --grace", pid)
	}
}
