package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The demo on both kinds of local node: real redis-server processes (with
// the restart guard and a killed and a frozen node) and in-process servers.
// Small numbers keep it quick; what matters is that nothing is oversold.
func TestDemo(t *testing.T) {
	// In-process servers run Lua slowly (far more so under -race): their
	// TTL of 2 s gives them a per-node timeout of 1 s.
	for _, mode := range [][]string{{"--ttl", "1s"}, {"--ttl", "2s", "--in-process"}} {
		args := append([]string{"demo", "--stock", "20", "--buyers", "40", "--wait", "20s"}, mode...)
		r := runCLI(t, args...)
		if r.code != exitOK {
			t.Fatalf("demo %v: %v", mode, r)
		}
		for _, want := range []string{`sold\s+20 of 20`, `oversold\s+0\b`, `failed\s+0 buyers`, `stale refused\s+0 stale writes`} {
			if !regexp.MustCompile(want).MatchString(r.stdout) {
				t.Errorf("demo %v: output lacks %q:\n%s", mode, want, r.stdout)
			}
		}
	}
}

// With --nodes the demo runs against the given deployment, and injects no
// fault into nodes it does not own.
func TestDemoOnGivenNodes(t *testing.T) {
	servers := redistest.Start(t, 3)
	r := runCLI(t, "demo", "--nodes", nodesFlag(servers...), "--restart-guard=off",
		"--stock", "10", "--buyers", "20", "--ttl", "1s", "--wait", "20s")
	if r.code != exitOK {
		t.Fatalf("demo --nodes: %v", r)
	}
	if !strings.Contains(r.stdout, "Using the 3 given nodes") || strings.Contains(r.stdout, "killed node") {
		t.Errorf("demo --nodes should use the given nodes and inject no fault:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`oversold\s+0\b`).MatchString(r.stdout) {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// --compare runs the sale with one lock and with segments on the same
// nodes, and prints both side by side: both sell everything, neither
// oversells.
func TestDemoCompare(t *testing.T) {
	r := runCLI(t, "demo", "--compare", "--local", "3", "--segments", "4", "--stock", "20", "--buyers", "40",
		"--ttl", "1s", "--wait", "20s", "--think", "1ms")
	if r.code != exitOK {
		t.Fatalf("demo --compare: %v", r)
	}
	for _, want := range []string{
		`one lock\s+4 segments`,
		`sold\s+20 of 20\s+20 of 20`,
		`oversold\s+0\s+0\n`,
		`failed\s+0 buyers\s+0 buyers`,
		`throughput\s+\d+ sales/s\s+\d+ sales/s`,
		`acquire p99\s+\S+\s+\S+`,
		`4 segments sold [0-9.]+ times as fast as one lock`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "killed node") {
		t.Errorf("--compare injected a fault:\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--segments", "0"}, {"--segments", "30", "--stock", "20"}, {"--compare", "--unsafe"}, {"--think", "-1s"}} {
		if r := runCLI(t, append([]string{"demo"}, bad...)...); r.code != exitUsage {
			t.Errorf("demo %v: exit %d, want %d (usage)", bad, r.code, exitUsage)
		}
	}
}

// The in-process demo, as a user runs it (its defaults: 100 items, 300
// buyers, 5 nodes, a node killed midway) while another process keeps every
// core busy, sells out and exits 0. It used to sell nothing in 30 s and
// exit 0 all the same: miniredis kept the keys of failed attempts forever.
// One run, bounded: the burner by a minute, the demo by --wait 30s and a
// kill at 2 minutes.
func TestInProcessDemoSellsOutOnABusyMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and saturates the CPU for up to a minute")
	}
	bin := buildCLI(t)
	startBurner(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb syncBuffer
	cmd := exec.CommandContext(ctx, bin, "demo", "--in-process")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if err != nil || r.code != exitOK {
		t.Fatalf("demo --in-process on a busy machine: %v\n%v", err, r)
	}
	for _, want := range []string{`sold\s+100 of 100`, `oversold\s+0\b`, `stock left\s+0\b`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// A sale that cannot sell out (another owner holds the sale's lock for
// longer than the buyers wait) exits 1 and says why.
func TestDemoThatDoesNotSellOutFails(t *testing.T) {
	servers := redistest.Start(t, 3)
	holdLock(t, "sale:item-1", time.Minute, servers...)
	r := runCLI(t, "demo", "--nodes", nodesFlag(servers...), noGuard,
		"--stock", "5", "--buyers", "8", "--ttl", "1s", "--wait", "1s")
	if r.code != exitError {
		t.Fatalf("demo on a lock held elsewhere: exit %d, want %d\n%v", r.code, exitError, r)
	}
	want := "redlock demo: the sale did not sell out: sold 0 of 5, 8 buyers did not obtain the lock within --wait 1s"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%v", want, r)
	}
	if r := runCLI(t, "demo", "--stock", "10", "--buyers", "9"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "fewer buyers than items") {
		t.Errorf("demo with fewer buyers than items: %v", r)
	}
}

// What each outcome of a sale means for the exit status.
func TestSaleVerdict(t *testing.T) {
	safe := demoConfig{stock: 10, wait: time.Second}
	unsafe := safe
	unsafe.unsafe = true
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		cfg  demoConfig
		r    saleResult
		want string // "" for success
	}{
		{"sold out", context.Background(), safe, saleResult{sold: 10}, ""},
		{"sold out, some buyers gave up", context.Background(), safe, saleResult{sold: 10, failed: 3}, ""},
		{"oversold under the lock", context.Background(), safe, saleResult{sold: 11, oversold: 1}, "oversold 1 items under the lock"},
		{"buyers waited in vain", context.Background(), safe, saleResult{sold: 4, left: 6, failed: 20},
			"did not sell out: sold 4 of 10, 20 buyers did not obtain the lock within --wait 1s"},
		{"items left", context.Background(), safe, saleResult{sold: 9, left: 1}, "did not sell out: sold 9 of 10, 1 items left"},
		{"interrupted", cancelled, safe, saleResult{sold: 2, left: 8}, "was interrupted: sold 2 of 10"},
		{"unsafe oversold", context.Background(), unsafe, saleResult{sold: 14, oversold: 4}, ""},
		{"unsafe sold out", context.Background(), unsafe, saleResult{sold: 10}, ""},
		{"unsafe with items left", context.Background(), unsafe, saleResult{sold: 12, oversold: 2, left: 3}, ""},
		{"unsafe interrupted", cancelled, unsafe, saleResult{sold: 2, left: 8}, "was interrupted"},
	} {
		err := tc.r.verdict(tc.ctx, tc.cfg, "the sale")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want success", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// On the demo's own nodes, --max-ttl sets the restart guard's window and
// --restart-guard turns it off; flags that cannot apply are refused.
// --unsafe takes no lock, so it starts no node and waits for none.
func TestDemoGuardFlagsOnOwnNodes(t *testing.T) {
	sale := []string{"--local", "3", "--faults=false", "--stock", "10", "--buyers", "20", "--ttl", "1s", "--wait", "20s"}
	start := time.Now()
	r := runCLI(t, append([]string{"demo", "--max-ttl", "3s"}, sale...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "the restart guard keeps them out of locking for\nthe longest TTL (3s)") {
		t.Fatalf("demo --max-ttl 3s: %v", r)
	}
	// Fresh nodes recover for --max-ttl: no sale before it has passed.
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("demo --max-ttl 3s returned after %v: the guard did not wait 3s", d)
	}

	r = runCLI(t, append([]string{"demo", "--restart-guard=off"}, sale...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "The restart guard is off") || strings.Contains(r.stdout, "keeps them out") {
		t.Errorf("demo --restart-guard=off: %v", r)
	}

	r = runCLI(t, "demo", "--unsafe", "--stock", "10", "--buyers", "20")
	if r.code != exitOK || !strings.Contains(r.stdout, "starts, uses and waits for no node") ||
		strings.Contains(r.stdout, "Started") || strings.Contains(r.stdout, "restart guard") {
		t.Errorf("demo --unsafe: %v", r)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--restart-guard", "persistent"}, "do not persist every write"},
		{[]string{"--in-process", "--restart-guard", "on"}, "in-process nodes cannot run the restart guard"},
		{[]string{"--max-ttl", "1s", "--ttl", "2s"}, "--ttl 2s: above --max-ttl 1s"},
		{[]string{"--restart-guard", "maybe"}, `--restart-guard "maybe": want on, persistent or off`},
	} {
		if r := runCLI(t, append([]string{"demo"}, bad.args...)...); r.code != exitUsage || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("demo %v: %v, want exit %d and %q", bad.args, r, exitUsage, bad.want)
		}
	}
}

// --faults on fewer own nodes than it needs to leave a quorum is refused:
// on 3 redis-server nodes, one killed and one frozen left one, and the
// sale stalled.
func TestDemoFaultsNeedAQuorumLeft(t *testing.T) {
	// Without SIGSTOP (Windows) --faults only kills a node.
	if redisproc.FreezeSupported() {
		r := runCLI(t, "demo", "--local", "3", "--stock", "10", "--buyers", "20", "--ttl", "1s", "--wait", "5s")
		if want := "--local 3: --faults needs at least 5 nodes"; r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("demo --local 3: %v, want exit %d and %q", r, exitUsage, want)
		}
	}
	// In-process nodes cannot be frozen: one killed of 3 leaves a quorum.
	r := runCLI(t, "demo", "--in-process", "--local", "3", "--stock", "10", "--buyers", "20", "--ttl", "2s", "--wait", "20s")
	if r.code != exitOK || !strings.Contains(r.stdout, "killed node 2") {
		t.Errorf("demo --in-process --local 3: %v", r)
	}
}

// --stall: the first purchase stalls past its lock's TTL between its read
// and its write. The fenced stock refuses its write and nothing is
// oversold; with --fence=false (the control) the write is accepted and the
// sale oversells, which that run shows rather than fails on.
func TestDemoStall(t *testing.T) {
	base := []string{"demo", "--stall", "--local", "3", "--faults=false", "--stock", "10", "--buyers", "20", "--ttl", "1s", "--wait", "20s", "--restart-guard=off"}
	r := runCLI(t, base...)
	if r.code != exitOK {
		t.Fatalf("demo --stall: %v", r)
	}
	for _, want := range []string{`sold\s+10 of 10`, `oversold\s+0\b`, `stale refused\s+1 stale writes refused`, `its write was refused by the fenced stock`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("demo --stall: output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, append(base, "--fence=false")...)
	if r.code != exitOK {
		t.Fatalf("demo --stall --fence=false: %v", r)
	}
	for _, want := range []string{`oversold\s+[1-9]`, `its write was accepted`, `not checked \(--fence=false\)`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("demo --stall --fence=false: output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := runCLI(t, "demo", "--stall", "--unsafe"); r.code != exitUsage {
		t.Errorf("--stall --unsafe: %v, want a usage error", r)
	}
}
