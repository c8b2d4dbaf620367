package repro

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The child half of TestPausedClientLearnsItLostTheLock: it holds a lock with
// auto-refresh, says so, and reports when it learns the lock is lost.
func pausedChild() int {
	var nodes []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_CHILD_NODES"), ",") {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	lock, err := c.TryObtain(context.Background(), "paused", time.Second, redlock.WithAutoRefresh())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held")
	select {
	case <-lock.Done():
		fmt.Println("lost", errors.Is(lock.Err(), redlock.ErrLost))
	case <-time.After(60 * time.Second):
		fmt.Println("still held after 60s")
	}
	return 0
}

func TestPausedClientLearnsItLostTheLock(t *testing.T) {
	cl := startNodes(t, 3)
	var addrs []string
	for _, s := range cl.servers {
		addrs = append(addrs, s.Addr())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REDLOCK_CHILD=paused", "REDLOCK_CHILD_NODES="+strings.Join(addrs, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = redistest.ResumeProcess(cmd.Process)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("no word from the child in 30s")
			return ""
		}
	}
	if l := next(); l != "held" {
		t.Fatalf("child: %q, want held", l)
	}
	// A stop-the-world pause three times the TTL.
	if err := redistest.PauseProcess(cmd.Process); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	c := newClient(t, cl.clients)
	mine, err := c.TryObtain(context.Background(), "paused", time.Minute)
	if err != nil {
		t.Fatalf("another client could not obtain the lock of a paused holder: %v", err)
	}
	if err := redistest.ResumeProcess(cmd.Process); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "lost true" {
		t.Fatalf("child after the pause: %q, want \"lost true\"", l)
	}
	// The child's comeback did not disturb the new holder.
	if err := mine.Refresh(context.Background(), time.Minute); err != nil {
		t.Fatalf("new holder's refresh after the child resumed: %v", err)
	}
}
