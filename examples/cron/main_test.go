package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// The test runs the example as separate OS processes: this test binary,
// started again with CRON_CHILD set, runs the command's run.
func TestMain(m *testing.M) {
	if os.Getenv("CRON_CHILD") == "1" {
		ctx, stop := signalContext()
		code := run(ctx, strings.Split(os.Getenv("CRON_ARGS"), "\n"), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// Five instances run the same schedule for 20 ticks of 500 ms: three on
// time, one that comes 300 ms late to every tick (it finds the tick's lock
// still held: no early release), and one 450 ms late (past the tick's
// window: it does not try). One of those on time is killed (SIGKILL) while
// it runs a tick. Every tick runs exactly once, the killed one's included,
// and the crash blocks no later tick.
func TestEveryTickRunsExactlyOnce(t *testing.T) {
	nodes, err := redisproc.StartServers(3, redisproc.Options{})
	if err != nil {
		t.Skip(err) // redis-server not installed
	}
	t.Cleanup(func() { redisproc.StopAll(nodes) })
	store, err := redisproc.StartServer(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Stop() })

	const (
		every = 500 * time.Millisecond
		ticks = 20
	)
	// Far enough ahead for the processes to start and the fresh nodes to
	// leave the restart guard's window (-max-ttl).
	from := time.Now().Add(3 * time.Second).Truncate(every).Add(every)
	lates := []time.Duration{0, 0, 0, 300 * time.Millisecond, 450 * time.Millisecond}
	type line struct {
		inst int
		text string
	}
	lines := make(chan line, 10000)
	var readers sync.WaitGroup
	t.Cleanup(readers.Wait)
	cmds := make([]*exec.Cmd, len(lates))
	for i, late := range lates {
		args := []string{
			"-nodes", strings.Join(redisproc.Addrs(nodes), ","), "-store", store.Addr(), "-id", fmt.Sprint("inst-", i),
			"-every", every.String(), "-work", "100ms", "-late", late.String(),
			"-from", fmt.Sprint(from.UnixMilli()), "-ticks", fmt.Sprint(ticks),
			"-max-ttl", "1s", "-node-timeout", "100ms",
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CRON_CHILD=1", "CRON_ARGS="+strings.Join(args, "\n"))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		readers.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				t.Logf("instance %d: %s", i, sc.Text())
				select {
				case lines <- line{i, sc.Text()}:
				default:
				}
			}
		})
		cmds[i] = cmd
	}

	// Kill an instance on time while it runs a tick, halfway through.
	half := from.Add(ticks / 2 * every).UnixMilli()
	killed := -1
	timeout := time.NewTimer(time.Until(from.Add(ticks*every)) + 10*time.Second)
	defer timeout.Stop()
	running := map[int]int{}
	for killed < 0 {
		select {
		case l := <-lines:
			var tick int64
			if _, err := fmt.Sscanf(l.text, "tick %d: running", &tick); err == nil {
				running[l.inst]++
				if tick >= half && lates[l.inst] == 0 {
					_ = cmds[l.inst].Process.Kill()
					killed = l.inst
					t.Logf("killed instance %d while it ran tick %d", l.inst, tick)
				}
			}
		case <-timeout.C:
			t.Fatal("no instance on time ran a tick in the second half")
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil && i != killed {
			t.Errorf("instance %d: %v", i, err)
		}
	}

	rdb := store.Client()
	defer rdb.Close()
	ctx := context.Background()
	for n := range ticks {
		tick := from.Add(time.Duration(n) * every).UnixMilli()
		runs, err := rdb.Get(ctx, fmt.Sprintf("cron:runs:%d", tick)).Int()
		if err != nil {
			runs = 0
		}
		if runs != 1 {
			t.Errorf("tick %d (%d of %d): %d runs, want exactly 1", tick, n+1, ticks, runs)
		}
	}
	// The late instances never ran a tick: one found each tick held, the
	// other was past every tick's window.
	for i, late := range lates {
		if late > 0 && running[i] > 0 {
			t.Errorf("instance %d, %v late, ran %d ticks", i, late, running[i])
		}
	}
}
