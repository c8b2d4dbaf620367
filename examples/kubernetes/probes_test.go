//go:build unix

package kubernetes

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestProbesOnRedis runs the nodes' readiness and liveness probes, as the
// kubelet runs them, against a redis-server started with the example's
// arguments and password. The readiness probe is redlock probe, built from
// cmd/redlock, with its --max-ttl cut to probeMaxTTL (the example's minute
// would make the test wait a minute): it fails while the node just started
// recovers under the restart guard, when the liveness probe passes; both
// pass on a voting node, and fail without the password (NOAUTH); the
// readiness probe fails while the node loads its AOF, when the liveness
// probe passes; a frozen node (SIGSTOP) fails the liveness probe within
// the probe's own timeout.
func TestProbesOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	nd, ok := findNodes(load(t), &report{})
	if !ok {
		t.Fatal("the example has no Redis nodes")
	}
	ready, live := nd.container.ReadinessProbe, nd.container.LivenessProbe
	if ready == nil || ready.Exec == nil || live == nil || live.Exec == nil {
		t.Fatal("the example's probes are not exec probes")
	}
	bin := filepath.Join(t.TempDir(), "redlock")
	goCmd(t, cliDir, "build", "-o", bin, ".")
	auth := []string{"REDISCLI_AUTH=" + testPassword, "REDLOCK_PASSWORD=" + testPassword}
	dir := t.TempDir()
	s := startRedis(t, nd.proc.argv[1:], dir)
	fill(t, s.dial(t, testPassword), 20000)
	ready = probeOn(ready, bin, s)
	expect := func(what string, env []string, wantReady, wantLive bool) {
		t.Helper()
		if got, took := runProbe(ready, env, s); got != wantReady {
			t.Errorf("%s: readiness probe passed=%v after %v, want %v", what, got, took, wantReady)
		}
		if got, took := runProbe(live, env, s); got != wantLive {
			t.Errorf("%s: liveness probe passed=%v after %v, want %v", what, got, took, wantLive)
		}
	}
	expect("started just now, recovering", auth, false, true)
	deadline := time.Now().Add(10 * probeMaxTTL)
	for ok, _ := runProbe(ready, auth, s); !ok; ok, _ = runProbe(ready, auth, s) {
		if time.Now().After(deadline) {
			t.Fatalf("the readiness probe still fails %v after the start (max TTL %v)", 10*probeMaxTTL, probeMaxTTL)
		}
		time.Sleep(200 * time.Millisecond)
	}
	expect("running, voting", auth, true, true)
	expect("running, without the password", nil, false, false)

	// Frozen: the kernel still accepts the connection; PING is never
	// answered. The liveness probe fails by its own timeout, before the
	// kubelet's.
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ok, took := runProbe(live, auth, s)
	if ok || took >= time.Duration(live.TimeoutSeconds)*time.Second {
		t.Errorf("frozen: liveness probe passed=%v after %v, want a failure within timeoutSeconds %d", ok, took, live.TimeoutSeconds)
	}
	if ok, took := runProbe(ready, auth, s); ok {
		t.Errorf("frozen: readiness probe passed after %v", took)
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Loading: the same node restarted, each key slowed down 200 µs.
	if _, err := s.dial(t, testPassword).do("SHUTDOWN"); err == nil {
		t.Fatal("SHUTDOWN answered")
	}
	<-s.exited
	s = startRedis(t, nd.proc.argv[1:], dir, "--key-load-delay", "200", "--loading-process-events-interval-bytes", "1024")
	ready = probeOn(nd.container.ReadinessProbe, bin, s)
	waitLoading(t, s)
	expect("loading", auth, false, true)
	if info := loadingInfo(t, s); !strings.Contains(info, "loading:1") {
		t.Fatalf("the node finished loading before the probes ran: the test says nothing about LOADING (%q)", info)
	}
}

// probeMaxTTL is the readiness probe's --max-ttl in TestProbesOnRedis.
const probeMaxTTL = 2 * time.Second

// probeOn is the readiness probe p (redlock probe) run by bin, on server
// s's port, with --max-ttl probeMaxTTL.
func probeOn(p *corev1.Probe, bin string, s *server) *corev1.Probe {
	q := p.DeepCopy()
	argv := q.Exec.Command
	argv[0] = bin
	for i := 1; i+1 < len(argv); i++ {
		switch argv[i] {
		case "--max-ttl":
			argv[i+1] = probeMaxTTL.String()
		case "--nodes":
			argv[i+1] = "redis://localhost:" + strconv.Itoa(s.port)
		}
	}
	return q
}

// fill writes n keys and has redis-server rewrite its AOF, so that a
// restart loads them from its base file.
func fill(t *testing.T, cn *conn, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		k, v := "key:"+strconv.Itoa(i), "value:"+strconv.Itoa(i)
		b.WriteString("*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n")
	}
	if _, err := cn.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := cn.read(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cn.do("BGREWRITEAOF"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v, err := cn.do("INFO", "persistence")
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := v.(string); strings.Contains(info, "aof_rewrite_in_progress:0") && !strings.Contains(info, "aof_rewrite_scheduled:1") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the AOF rewrite did not end")
		}
	}
}

// loadingInfo is the loading line of INFO persistence, which redis-server
// answers while it loads.
func loadingInfo(t *testing.T, s *server) string {
	t.Helper()
	v, err := s.dial(t, testPassword).do("INFO", "persistence")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := v.(string)
	for line := range strings.SplitSeq(info, "\r\n") {
		if strings.HasPrefix(line, "loading:") {
			return line
		}
	}
	return info
}

// waitLoading waits until s is loading its data.
func waitLoading(t *testing.T, s *server) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(loadingInfo(t, s), "loading:1"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node did not start loading")
		}
	}
}
