//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// oneLine fails the test unless run's stderr is one message line.
func oneLine(t *testing.T, what string, r result) {
	t.Helper()
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "redlock run: ") {
		t.Errorf("%s: want one line on stderr: %v", what, r)
	}
}

// TestRunMessages: a node's script error without Lua internals, a wait
// that ran out said in one sentence, a script whose interpreter is missing.
func TestRunMessages(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	rc := servers[0].Client()
	defer rc.Close()
	ctx := context.Background()

	// Every write refused: the acquire script's error names the node's
	// reason, not the script's SHA and line.
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "run", nodes, noGuard, "job", "--", "true")
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "OOM command not allowed") || strings.Contains(r.stderr, "script:") || strings.Contains(r.stderr, "user_script") {
		t.Errorf("out of memory: want the node's reason without the script's internals: %v", r)
	}
	oneLine(t, "out of memory", r)

	// The wait runs out: said once, in the sentence, not as a line of
	// "context deadline exceeded".
	holdLock(t, "busy", 10*time.Second, servers...)
	r = runCLI(t, "run", nodes, noGuard, "--wait", "300ms", "busy", "--", "true")
	if r.code != exitNotObtained || !strings.Contains(r.stderr, "not obtained within 300ms") || strings.Contains(r.stderr, "deadline exceeded") {
		t.Errorf("--wait ran out: %v", r)
	}
	oneLine(t, "--wait ran out", r)

	// A script whose #! interpreter is missing: 127, as bash and dash exit,
	// and the message says it is the interpreter that is missing.
	script := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\necho hi\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "run", nodes, noGuard, wait, "job", "--", script)
	if r.code != exitNotFound || !strings.Contains(r.stderr, "its interpreter") {
		t.Errorf("missing interpreter: want exit %d and the interpreter named: %v", exitNotFound, r)
	}
}

// TestTLSToPlainServer: a rediss:// URL to a server without TLS says that
// the TLS handshake failed, not only that no answer came in time.
func TestTLSToPlainServer(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=rediss://" + servers[0].Addr()
	for _, args := range [][]string{
		{"run", nodes, noGuard, "--timeout", "500ms", "job", "--", "true"},
		{"inspect", nodes, "--timeout", "500ms", "job"},
		{"doctor", nodes, "--timeout", "500ms"},
	} {
		r := runCLI(t, args...)
		if !strings.Contains(r.stdout+r.stderr, "TLS handshake failed") || !strings.Contains(r.stdout+r.stderr, "serves Redis without TLS") {
			t.Errorf("redlock %s: want the TLS handshake named: %v", args[0], r)
		}
	}
}

// TestSentinelNodeNamedInErrors: a node managed by Sentinel is named by its
// master and sentinels in the library's errors, not "FailoverClient".
func TestSentinelNodeNamedInErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinelT(t, "lockmaster")
	others := redistest.Start(t, 2)
	nodes := "redis-sentinel://" + strings.Join(d.SentinelAddrs(), ",") + "/lockmaster," + nodesFlag(others...)
	holdLock(t, "s", 10*time.Second, append([]*redistest.Server{d.Master}, others...)...)
	r := runCLI(t, "run", "--nodes", nodes, noGuard, "s", "--", "true")
	want := "node 0 (sentinel lockmaster (" + strings.Join(d.SentinelAddrs(), ",") + ")): "
	if r.code != exitNotObtained || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "FailoverClient") {
		t.Errorf("want %q: %v", want, r)
	}
}
