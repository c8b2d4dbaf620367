package redlock

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestReadmeQuickStartExplainsTheWait runs the README's quick start, as
// a newcomer would, against three redis-server processes started just
// before: the restart guard refuses locks for a minute, and the program
// says so at once instead of sitting silent (issue 49, "the first minute,
// silent"). It is stopped once it has spoken.
func TestReadmeQuickStartExplainsTheWait(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := quickStart(string(b))
	if !ok {
		t.Fatal("README.md has no quick start")
	}
	const addrs = `"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"`
	if !strings.Contains(src, addrs) {
		t.Fatalf("the quick start no longer lists its nodes as %s: update this test", addrs)
	}
	servers := redistest.Start(t, 3)
	local := make([]string, len(servers))
	for i, s := range servers {
		local[i] = strconv.Quote(s.Addr())
	}
	src = strings.Replace(src, addrs, strings.Join(local, ", "), 1)
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, main).CombinedOutput(); err != nil {
		t.Fatalf("the quick start does not build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	// It waits a minute for the nodes; it must say why well before.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "recovering") {
		select {
		case <-done:
			t.Fatalf("the quick start ended without a word of the restart guard:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quick start said nothing of the restart guard for 20 s of its minute's wait:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the quick start said:\n%s", out.String())
}
