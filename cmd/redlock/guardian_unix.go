//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A guardian is a second redlock process that kills the command's process
// group if redlock run ends without ending it: a kill -9, the OOM killer,
// a supervisor that stops only the main process. Nothing keeps the lock
// alive then, and the group must not run on past its TTL beside the next
// holder. The command's own parent-death signal (Linux) ends the command
// alone, not what it started.
//
// It reads its standard input, a pipe whose only writer is run (the end
// is close-on-exec, so the command does not hold it): first the group's
// id, then "done" once run has seen the group end. End of input without
// "done" means that run died: the guardian sends SIGKILL to the group and
// exits. It is in a process group of its own and ignores the signals that
// a terminal or a supervisor's SIGTERM to run would send it.
type guardian struct {
	cmd *exec.Cmd
	w   *os.File // the pipe to its standard input
}

// startGuardian starts the guardian, which says on stderr what it did.
// The caller must call stand.
func startGuardian() (*guardian, error) {
	exe := "/proc/self/exe" // the running binary, even if its file was replaced
	if runtime.GOOS != "linux" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envGuardian+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &guardian{cmd: cmd, w: w}, nil
}

// watch gives the guardian the command's process group.
func (g *guardian) watch(pgid int) error {
	_, err := fmt.Fprintf(g.w, "%d\n", pgid)
	return err
}

// stand tells the guardian that the group has ended (or was never
// started), and waits for it to exit.
func (g *guardian) stand() {
	_, _ = io.WriteString(g.w, "done\n")
	_ = g.w.Close()
	_ = g.cmd.Wait()
}

// guardianMain is the guardian process: run is the pid of the redlock run
// it guards; its protocol comes on in.
func guardianMain(run string, in io.Reader, stderr io.Writer) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTTIN, syscall.SIGTTOU)
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		return 0 // run ended before the command started
	}
	if sc.Text() == "done" {
		return 0 // the command did not start
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	if err != nil || pgid <= 1 {
		fmt.Fprintf(stderr, "redlock run (guardian): bad process group %q\n", sc.Text())
		return exitError
	}
	for sc.Scan() {
		if sc.Text() == "done" {
			return 0
		}
	}
	// run died with the group running: nothing keeps the lock alive.
	if errors.Is(syscall.Kill(-pgid, syscall.SIGKILL), syscall.ESRCH) {
		return 0
	}
	fmt.Fprintf(stderr, "redlock run (guardian): redlock run (pid %s) ended without ending its command: killed the command's process group %d, which no longer held the lock\n", run, pgid)
	// Again, for a process that was forking at the first kill: the
	// kernel does not let a fork outlive a kill of its group, but the
	// cost of making sure is nothing.
	for _, d := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
		time.Sleep(d)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}
