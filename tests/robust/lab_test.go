//go:build linux

package robust

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/examples/fenced-storage/store"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/tests/robust/history"
	"github.com/redlock-go/redlock/tests/robust/lockclient"
	"github.com/redlock-go/redlock/tests/robust/netlab"
)

const (
	numNodes  = 5
	redisPort = "6379"
)

// lab is one scenario's deployment: five lock nodes and the clients, each
// in a network namespace of its own, joined by the netlab switch; and the
// fenced store, in the test's own namespace, which no fault touches.
type lab struct {
	t       testing.TB
	net     *netlab.Lab
	nodes   []*labNode
	clients []string // the client namespaces' names
	store   *redisproc.Server
	storeDB *redis.Client
	rec     *history.Recorder

	mu      sync.Mutex
	holding map[string]bool // clients inside their work under the lock
	kids    []*kid
}

// labNode is a redis-server in a namespace of its own.
type labNode struct {
	name, addr, dir string
	l               *lab
	mu              sync.Mutex
	cmd             *exec.Cmd
	exited          chan struct{}
	paused          bool
}

// newLab creates the namespaces (n0..n4, c0..), starts the nodes and the
// store, and removes everything when the test ends, whether it passed or
// not. It fails the test, saying why, when namespaces cannot be made.
func newLab(t testing.TB, clients int, seed int64) *lab {
	t.Helper()
	var names []string
	for i := range numNodes {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	l := &lab{t: t, rec: &history.Recorder{}, holding: map[string]bool{}}
	for i := range clients {
		l.clients = append(l.clients, fmt.Sprintf("c%d", i))
	}
	nl, err := netlab.New(append(names, l.clients...), uint64(seed))
	if err != nil {
		t.Fatalf("the robustness scenarios need network namespaces, and none could be made: %v", err)
	}
	l.net = nl
	// Cleanups run last-registered first: the namespaces go after the
	// processes in them.
	t.Cleanup(func() {
		if err := nl.Close(); err != nil {
			t.Errorf("remove the lab: %v", err)
		}
	})
	for _, name := range names {
		n := &labNode{name: name, addr: net.JoinHostPort(nl.Addr(name), redisPort), dir: t.TempDir(), l: l}
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.stop)
		l.nodes = append(l.nodes, n)
	}
	l.store, err = redisproc.StartServer(redisproc.Options{Args: []string{"--bind", "127.0.0.1", nl.Addr(netlab.Root)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.store.Stop() })
	l.storeDB = l.store.Client()
	t.Cleanup(func() { _ = l.storeDB.Close() })
	return l
}

// start starts the node's redis-server in its namespace and waits until it
// answers (from the test's namespace, through the switch).
func (n *labNode) start() error {
	cmd := n.l.net.Command(n.name, "redis-server", "--port", redisPort, "--bind", n.l.net.Addr(n.name),
		"--save", "", "--appendonly", "no", "--dir", n.dir, "--logfile", "redis.log", "--daemonize", "no", "--protected-mode", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server in %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for deadline := time.Now().Add(15 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return fmt.Errorf("redis-server in %s exited at start: %s", n.name, b)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server in %s not ready: %v", n.name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill kills the node (SIGKILL): a crash; its data is gone.
func (n *labNode) kill() {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	<-exited
}

// restart crashes the node and starts it again, empty.
func (n *labNode) restart() error {
	n.kill()
	return n.start()
}

func (n *labNode) stop() { n.kill() }

// freeze stops the node's process (SIGSTOP) until thaw.
func (n *labNode) freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process.Signal(syscall.SIGSTOP) == nil {
		n.paused = true
	}
}

func (n *labNode) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// nodeAddrs are the nodes' addresses.
func (l *lab) nodeAddrs() []string {
	var a []string
	for _, n := range l.nodes {
		a = append(a, n.addr)
	}
	return a
}

// waitRecovered waits out the restart guard's first recovery window of
// the fresh nodes (a lock obtained from the test's namespace).
func (l *lab) waitRecovered(maxTTL time.Duration) {
	l.t.Helper()
	var nodes []redis.UniversalClient
	for _, a := range l.nodeAddrs() {
		rc := nodeClient(a, 0)
		defer rc.Close()
		nodes = append(nodes, rc)
	}
	c, err := lockclient.New(nodes, lockclient.Config{NodeTimeout: 100 * time.Millisecond, MaxTTL: maxTTL})
	if err != nil {
		l.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second+2*maxTTL)
	defer cancel()
	lk, err := c.Obtain(ctx, "robust:warmup", lockclient.Plain, maxTTL, "warmup", false)
	if err != nil {
		l.t.Fatalf("the nodes did not leave their first recovery: %v", err)
	}
	_ = lk.Release()
}

// kid is a client process.
type kid struct {
	id   string
	cmd  *exec.Cmd
	read chan struct{} // closed when its output has been read
	stop time.Time
}

// childEnv carries a client process's configuration.
const childEnv = "REDLOCK_ROBUST_CLIENT"

// startClient starts the test binary again as client cfg.ID in its own
// namespace (ip netns exec); prefix, when set, runs it under another
// program first (unshare, for a time namespace).
func (l *lab) startClient(cfg clientConfig, prefix ...string) (*kid, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, prefix...), os.Args[0], "-test.run=^$")
	cmd := l.net.Command(cfg.ID, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start client %s: %w", cfg.ID, err)
	}
	k := &kid{id: cfg.ID, cmd: cmd, read: make(chan struct{}), stop: time.Unix(0, cfg.Stop)}
	l.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
	})
	go func() {
		defer close(k.read)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			kind, body, _ := strings.Cut(sc.Text(), " ")
			switch kind {
			case "ev":
				var e history.Event
				if json.Unmarshal([]byte(body), &e) == nil {
					l.rec.Add(e)
				}
			case "in":
				l.mu.Lock()
				l.holding[cfg.ID] = body == "1"
				l.mu.Unlock()
			}
		}
	}()
	l.mu.Lock()
	l.kids = append(l.kids, k)
	l.mu.Unlock()
	return k, nil
}

// wait reaps the client, killing it if it outlives its stop by a margin.
func (k *kid) wait() error {
	t := time.NewTimer(time.Until(k.stop) + 30*time.Second)
	defer t.Stop()
	select {
	case <-k.read:
	case <-t.C:
		_ = k.cmd.Process.Signal(syscall.SIGCONT)
		_ = k.cmd.Process.Kill()
		<-k.read
	}
	return k.cmd.Wait()
}

// pause freezes the client's whole process for d (SIGSTOP, SIGCONT).
func (k *kid) pause(d time.Duration) {
	if k.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return
	}
	time.Sleep(d)
	_ = k.cmd.Process.Signal(syscall.SIGCONT)
}

// whenHolding waits until client id (any client when "") holds the lock,
// at most max; it reports whether it does.
func (l *lab) whenHolding(ctx context.Context, id string, max time.Duration) bool {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l.mu.Lock()
		h := false
		for c, in := range l.holding {
			h = h || (in && (id == "" || c == id))
		}
		l.mu.Unlock()
		if h {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// fault records a fault of the run.
func (l *lab) fault(kind, target string, start, stop time.Time, text string) {
	l.rec.Add(history.Event{Type: history.TypeFault, Text: text,
		FaultFields: history.FaultFields{Fault: kind, Target: target, Start: start.UnixNano(), Stop: stop.UnixNano()}})
}

// partition cuts client from each of nodes (both ways: packets dropped,
// no connection closed) for d, and heals it.
func (l *lab) partition(ctx context.Context, client string, nodes []int, d time.Duration) {
	start := time.Now()
	for _, n := range nodes {
		_ = l.net.SetBoth(client, l.nodes[n].name, netlab.Policy{Drop: true})
	}
	sleepCtx(ctx, d)
	for _, n := range nodes {
		_ = l.net.SetBoth(client, l.nodes[n].name, netlab.Policy{})
	}
	l.fault("partition", fmt.Sprintf("%s | nodes %v", client, nodes), start, time.Now(), "")
}

// everyLink sets p on both directions of every link between a client and a
// node.
func (l *lab) everyLink(p netlab.Policy) {
	for _, c := range l.clients {
		for _, n := range l.nodes {
			_ = l.net.SetBoth(c, n.name, p)
		}
	}
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// spec is a scenario's run: its clients, how long they run, and its faults.
type spec struct {
	name    string
	seed    int64
	d       time.Duration
	clients []clientConfig
	// prefix[i], when set, runs client i under another program
	// (unshare for a time namespace).
	prefix [][]string
	inject func(ctx context.Context, l *lab)
	// control: the run must show a violation.
	control bool
	config  any // what drew the run, for the history's header
}

// run runs s on the lab and checks its history.
func (l *lab) run(s spec) (history.Result, []history.Event) {
	l.t.Helper()
	cfgJSON, _ := json.Marshal(map[string]any{"clients": s.clients, "drawn": s.config})
	l.rec.Add(history.Event{Type: history.TypeRun, RunFields: history.RunFields{Scenario: s.name, Seed: s.seed, Config: cfgJSON}})
	stop := time.Now().Add(s.d)
	for i := range s.clients {
		s.clients[i].Stop = stop.UnixNano()
		var pre []string
		if i < len(s.prefix) {
			pre = s.prefix[i]
		}
		if _, err := l.startClient(s.clients[i], pre...); err != nil {
			l.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), stop)
	defer cancel()
	if s.inject != nil {
		s.inject(ctx, l)
	}
	<-ctx.Done()
	l.net.ClearAll()
	for _, n := range l.nodes {
		n.thaw()
	}
	l.mu.Lock()
	kids := l.kids
	l.kids = nil
	l.mu.Unlock()
	for _, k := range kids {
		if err := k.wait(); err != nil {
			l.t.Errorf("client %s: %v", k.id, err)
		}
	}
	l.final()
	events := l.rec.Events()
	r, err := history.Check(events, porcupineTimeout, filepath.Join(l.t.TempDir(), "porcupine.html"))
	if err != nil {
		l.t.Error(err)
	}
	if p := checkJumps(events); p != "" {
		l.t.Error(p)
	}
	fwd, drop := l.net.Stats()
	l.t.Logf("seed %d: %d holds; %d packets forwarded, %d dropped by faults", s.seed, r.Holds, fwd, drop)
	l.t.Logf("%s", r.Row())
	if r.Linearizable == porcupine.Unknown {
		l.t.Logf("porcupine did not finish within %v: linearizability unknown", porcupineTimeout)
	}
	return r, events
}

// verdict is what is wrong with a run of s: a control without a
// violation, or a violation in any other run; "" when nothing is.
func verdict(s spec, r history.Result) string {
	switch {
	case s.control && !r.Violations():
		return fmt.Sprintf("%s (seed %d): the control showed no violation", s.name, s.seed)
	case !s.control && r.Violations():
		return fmt.Sprintf("%s (seed %d): violation", s.name, s.seed)
	}
	return ""
}

// conclude reports a run: its row (-robust.report), and its history saved
// when something is wrong or when asked (-robust.save,
// REDLOCK_ROBUST_SAVE), with porcupine's visualization of a violation. A
// problem fails the test when fail is set, and is logged otherwise (a run
// that will be tried again).
func (l *lab) conclude(s spec, r history.Result, events []history.Event, problem string, fail bool) {
	l.t.Helper()
	if *flagReport != "" && (problem == "" || fail) {
		appendLine(*flagReport, r.Row())
	}
	if problem != "" {
		if fail {
			l.t.Errorf("%s: %s", problem, r.Row())
		} else {
			l.t.Logf("%s: %s; trying again", problem, r.Row())
		}
	}
	dir := saveDir()
	if problem == "" && dir == "" {
		return
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "redlock-robust")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.t.Error(err)
		return
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%d", strings.ReplaceAll(s.name, "/", "_"), s.seed))
	if err := history.Save(base+".jsonl", events); err != nil {
		l.t.Error(err)
		return
	}
	l.t.Logf("history saved: %s.jsonl (check it again: go run ./cmd/robustcheck -timeline %s.jsonl)", base, base)
	if r.Linearizable == porcupine.Illegal {
		if _, err := history.Linearizable(events, porcupineTimeout, base+".html"); err == nil {
			l.t.Logf("porcupine's visualization: %s.html", base)
		}
	}
}

// final records the store's final state.
func (l *lab) final() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := store.New(l.storeDB, storeName)
	v, _, err := st.Read(ctx)
	if err != nil {
		l.t.Fatalf("read the store: %v", err)
	}
	acc, rej, err := st.Stats(ctx)
	if err != nil {
		l.t.Fatalf("store stats: %v", err)
	}
	l.rec.Add(history.Event{Type: history.TypeFinal, FinalFields: history.FinalFields{Final: atoi(v), Accepted: acc, Rejected: rej}})
}

// porcupineTimeout bounds porcupine's search; a search cut short is
// reported as Unknown, which fails no run.
const porcupineTimeout = time.Minute

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, _ = fmt.Fprintln(f, line)
		_ = f.Close()
	}
}

// saveDir is where every history is saved, when asked.
func saveDir() string {
	if *flagSave != "" {
		return *flagSave
	}
	return os.Getenv("REDLOCK_ROBUST_SAVE")
}

// baseClient is a client of the default workload: a plain lock of 500 ms
// held 100 ms, fenced, with the restart guard.
func baseClient(id string, l *lab) clientConfig {
	return clientConfig{
		ID: id, Nodes: l.nodeAddrs(), Store: net.JoinHostPort(l.net.Addr(netlab.Root), strconv.Itoa(l.store.Port())),
		Kind: lockclient.Plain, TTL: 500 * time.Millisecond, MaxTTL: time.Second, NodeTimeout: 100 * time.Millisecond,
		Hold: 100 * time.Millisecond, Bound: 2 * time.Second, Fenced: true, Guard: true, Belief: beliefValidity,
	}
}
