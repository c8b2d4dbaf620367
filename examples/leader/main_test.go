package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redisproc"
)

// The test runs the example as separate OS processes: this test binary,
// started again with LEADER_CHILD set, runs the command's run.
func TestMain(m *testing.M) {
	if os.Getenv("LEADER_CHILD") == "1" {
		ctx, stop := signalContext()
		code := run(ctx, strings.Split(os.Getenv("LEADER_ARGS"), "\n"), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// event is a line an instance printed.
type event struct {
	inst int
	line string
}

// instance is one leader process, with its own proxy to each lock node so
// that the test can cut it off from them.
type instance struct {
	cmd     *exec.Cmd
	proxies []*faultproxy.Proxy
}

func (in *instance) partition(on bool) {
	for _, p := range in.proxies {
		p.SetBlackhole(on)
	}
}

// Three instances race for leadership while the test kills the leader's
// process (SIGKILL), freezes the next one (SIGSTOP) past its TTL and cuts
// the third off from the lock nodes. Each time another instance takes
// over, and the journal the leaders write, fenced by their tokens, shows
// one leader at a time: its tokens never go down.
func TestLeaderElectionSurvivesKillFreezeAndPartition(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
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

	const ttl = 2 * time.Second
	events := make(chan event, 10000)
	var readers sync.WaitGroup
	t.Cleanup(readers.Wait)
	insts := make([]*instance, 3)
	for i := range insts {
		in := &instance{}
		var addrs []string
		for _, n := range nodes {
			p, err := faultproxy.New(n.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			in.proxies = append(in.proxies, p)
			addrs = append(addrs, p.Addr())
		}
		args := []string{
			"-nodes", strings.Join(addrs, ","), "-store", store.Addr(), "-id", fmt.Sprint("inst-", i),
			"-ttl", ttl.String(), "-every", "100ms", "-max-ttl", ttl.String(), "-node-timeout", "150ms",
		}
		in.cmd = exec.Command(os.Args[0], "-test.run=^$")
		in.cmd.Env = append(os.Environ(), "LEADER_CHILD=1", "LEADER_ARGS="+strings.Join(args, "\n"))
		in.cmd.Stderr = os.Stderr
		out, err := in.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := in.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = redisproc.ResumeProcess(in.cmd.Process)
			_ = in.cmd.Process.Kill()
			_ = in.cmd.Wait()
		})
		readers.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				t.Logf("instance %d: %s", i, sc.Text())
				select {
				case events <- event{i, sc.Text()}:
				default: // the test has stopped reading
				}
			}
		})
		insts[i] = in
	}

	// await returns the first event that matches, within d.
	await := func(what string, d time.Duration, match func(event) bool) event {
		t.Helper()
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case e := <-events:
				if match(e) {
					return e
				}
			case <-timer.C:
				t.Fatalf("no %s within %v", what, d)
			}
		}
	}
	leading := func(exclude ...int) func(event) bool {
		return func(e event) bool {
			for _, x := range exclude {
				if e.inst == x {
					return false
				}
			}
			return strings.HasPrefix(e.line, "leading ")
		}
	}
	// The nodes were just started: the restart guard keeps them out of
	// locking for the longest TTL first.
	first := await("first leader", 30*time.Second, leading())
	time.Sleep(time.Second) // it works

	// A crash: the lock runs out after its TTL, and another takes over.
	_ = insts[first.inst].cmd.Process.Kill()
	second := await("leader after the kill", 30*time.Second, leading(first.inst))
	time.Sleep(time.Second)

	// A freeze past the TTL: the third takes over. Woken up, the frozen
	// leader learns it lost the lock, or the journal refuses it.
	third := 3 - first.inst - second.inst
	if err := redisproc.PauseProcess(insts[second.inst].cmd.Process); err != nil {
		t.Fatal(err)
	}
	await("leader after the freeze", 30*time.Second, leading(first.inst, second.inst))
	time.Sleep(time.Second)
	if err := redisproc.ResumeProcess(insts[second.inst].cmd.Process); err != nil {
		t.Fatal(err)
	}
	await("the frozen leader stepping down", 30*time.Second, func(e event) bool {
		return e.inst == second.inst && (strings.HasPrefix(e.line, "lost ") || strings.HasPrefix(e.line, "fenced "))
	})

	// A partition: the leader, cut off from the lock nodes but not from
	// the journal, stops by itself at its loss deadline, before the other
	// one (the thawed one) can take over: the journal never refuses it.
	time.Sleep(time.Second)
	insts[third].partition(true)
	var stepped event
	takeover := false
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for stepped.line == "" || !takeover {
		select {
		case e := <-events:
			switch {
			case e.inst == third && strings.HasPrefix(e.line, "fenced "):
				t.Fatalf("the partitioned leader wrote after its successor: %s", e.line)
			case e.inst == third && strings.HasPrefix(e.line, "lost "):
				stepped = e
			case e.inst == second.inst && strings.HasPrefix(e.line, "leading "):
				if stepped.line == "" {
					t.Fatalf("instance %d leads before the partitioned leader stepped down", second.inst)
				}
				takeover = true
			}
		case <-deadline.C:
			t.Fatalf("after the partition: stepped down %q, taken over %v", stepped.line, takeover)
		}
	}
	time.Sleep(time.Second)
	insts[third].partition(false)
	for _, in := range insts {
		_ = in.cmd.Process.Signal(os.Interrupt)
	}
	for _, in := range insts {
		_ = in.cmd.Wait()
	}

	// The journal: tokens never go down, each token is one instance's,
	// and at least three leaders wrote.
	rdb := store.Client()
	defer rdb.Close()
	ctx := context.Background()
	entries, err := rdb.LRange(ctx, journalEntries, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var (
		last    int64
		owner   = map[int64]string{}
		leaders = map[string]bool{}
	)
	for i, e := range entries {
		f := strings.Fields(e)
		token, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || len(f) != 3 {
			t.Fatalf("entry %d: %q", i, e)
		}
		if token < last {
			t.Fatalf("entry %d: token %d after %d: two leaders acted at once", i, token, last)
		}
		if o, ok := owner[token]; ok && o != f[1] {
			t.Fatalf("token %d used by %s and %s", token, o, f[1])
		}
		owner[token], last, leaders[f[1]] = f[1], token, true
	}
	st, err := fence.NewRedis(rdb).Inspect(ctx, journalFence)
	if err != nil {
		t.Fatal(err)
	}
	rejected := st.Refused
	t.Logf("journal: %d entries, %d leaderships, %d instances led, %d stale writes refused", len(entries), len(owner), len(leaders), rejected)
	if len(owner) < 4 || len(leaders) < 3 {
		t.Errorf("%d leaderships by %d instances; want at least 4 by 3", len(owner), len(leaders))
	}
}
