//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRunHoldsWhileTheGroupLives runs a command that exits at once and
// leaves a process of its group running: the lock stays held until that
// process exits, and run's status is the command's own.
func TestRunHoldsWhileTheGroupLives(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := "--nodes=" + nodesFlag(servers...)
	dir := t.TempDir()
	pidFile, goFile := filepath.Join(dir, "pid"), filepath.Join(dir, "go")
	// The left-over process waits for the test's "go" (20 s at most).
	script := `(i=0; while [ ! -e "$2" ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done) & echo $! > "$1"; echo done; exit 3`
	out, done := startCLI(t, "run", nodes, noGuard, wait, "--ttl", "2s", "group", "--", "sh", "-c", script, "sh", pidFile, goFile)
	waitFor(t, "the command to exit", func() bool { return strings.Contains(out.String(), "done") })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The command has exited; its background process runs: held, for
	// longer than the TTL (kept alive).
	time.Sleep(2500 * time.Millisecond)
	if r := runCLI(t, "inspect", nodes, "group"); !strings.Contains(r.stdout, "held by owner") {
		t.Errorf("the lock was released while a process of the command's group ran: %v", r)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := done()
	if r.code != 3 {
		t.Errorf("want the command's status 3: %v", r)
	}
	if alive(pid) {
		t.Errorf("run returned while process %d of the group lived", pid)
	}
	if r := runCLI(t, "inspect", nodes, "group"); !strings.Contains(r.stdout, "free on every node") {
		t.Errorf("lock not released after the group ended: %v", r)
	}
}

// TestRunLostAfterCommandExited loses the lock while only a process the
// command left in its group runs: that process is terminated, as the
// command would have been, and run exits 76.
func TestRunLostAfterCommandExited(t *testing.T) {
	servers := redistest.Start(t, 3)
	pidFile := filepath.Join(t.TempDir(), "pid")
	out, done := startCLI(t, "run", "--nodes", nodesFlag(servers...), noGuard, wait, "--ttl", "1s", "--grace", "300ms",
		"lost", "--", "sh", "-c", `sleep 30 & echo $! > "$1"; echo done`, "sh", pidFile)
	waitFor(t, "the command to exit", func() bool { return strings.Contains(out.String(), "done") })
	for _, s := range servers[:2] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	r := done()
	if r.code != exitLost || !strings.Contains(r.stderr, "sending SIGTERM") {
		t.Errorf("want exit %d after SIGTERM to the group: %v", exitLost, r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || alive(pid) {
		t.Errorf("the group's process %d outlived the lock", pid)
	}
}

// alive reports whether process pid runs: it exists and, where /proc tells,
// is not a zombie (an exited process not yet reaped).
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) || runtime.GOOS != "linux"
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// TestRunKilledEndsGroup: a kill -9 of redlock run ends the command's
// whole process group, a grandchild that outlived its parent included,
// before the lock's TTL has run out on the nodes (R1 of issue 49): the
// guardian process, which outlives run, kills the group when run dies.
func TestRunKilledEndsGroup(t *testing.T) {
	servers := redistest.Start(t, 3)
	bin := buildCLI(t)
	dir := t.TempDir()
	pidFile, ready := filepath.Join(dir, "pid"), filepath.Join(dir, "ready")
	name := "killed-run"
	// The inner shell starts the grandchild and exits: the grandchild
	// outlives its parent. The command then waits in sleep.
	script := `sh -c 'sleep 300 & echo $! > "$1"' sh "$1"; touch "$2"; exec sleep 300`
	cmd := exec.Command(bin, "run", noGuard, wait, "--ttl", "30s", "--nodes", nodesFlag(servers...),
		name, "--", "sh", "-c", script, "sh", pidFile, ready)
	// A file, not a pipe: waiting for run must not wait for the
	// processes that inherited its output.
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := waitProcess(t, cmd)
	waitFor(t, "the command to start its grandchild", func() bool { _, err := os.Stat(ready); return err == nil })
	waitFor(t, "the lock's key on every node", func() bool { return heldOn(t, name, servers) == len(servers) })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || grandchild <= 1 || !alive(grandchild) {
		t.Fatalf("grandchild %q not running: %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited.done
	waitFor(t, "the grandchild to be killed", func() bool { return !alive(grandchild) })
	// The key is still on the nodes, its TTL running: the grandchild
	// ended before it could overlap with the next holder.
	if n := heldOn(t, name, servers); n < len(servers)/2+1 {
		t.Errorf("the lock's key is on %d of %d nodes when the grandchild ended: its TTL ran out first", n, len(servers))
	}
	waitFor(t, "the guardian to say what it did", func() bool {
		said, _ := os.ReadFile(out.Name())
		return strings.Contains(string(said), "killed the command's process group")
	})
}
