package rueidis_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// With RUEIDIS_QUEUE_TYPE=flowbuffer, as the package documentation
// advises, requests to a frozen node end at their deadline even when more
// of them are outstanding than a connection's ring holds: 600 obtains on
// one connection with a ring of 256 and up to 512 requests in flight. (With
// rueidis's default ring, the same run measured obtains of up to 12 s,
// until ConnWriteTimeout closed the connection.) rueidis reads the
// variable once, when the process starts: the test runs itself again in a
// child process with it set.
func TestFlowBufferHonoursDeadlines(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
	if os.Getenv("RUEIDIS_QUEUE_TYPE") != "flowbuffer" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFlowBufferHonoursDeadlines$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "RUEIDIS_QUEUE_TYPE=flowbuffer")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the child process with RUEIDIS_QUEUE_TYPE=flowbuffer: %v\n%s", err, out)
		}
		t.Logf("child process:\n%s", out)
		return
	}
	s := redistest.Start(t, 1)[0]
	n := rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true, PipelineMultiplex: -1, RingScaleEachConn: 8}))
	c, err := redlock.NewFromNodes([]driver.Node{n}, redlock.WithMaxInFlight(512), redlock.WithNodeTimeout(300*time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var warm sync.WaitGroup
	for i := range 50 { // concurrent requests: the connection pipelines from now on
		warm.Go(func() {
			if l, err := c.TryObtain(ctx, fmt.Sprint("warm-", i), 10*time.Second); err == nil {
				_ = l.Release(ctx)
			}
		})
	}
	warm.Wait()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = s.Resume()
		}
	}()
	const bound = 5 * time.Second // the deadline is 300 ms
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		worst time.Duration
	)
	for i := range 600 {
		wg.Go(func() {
			start := time.Now()
			if l, err := c.TryObtain(ctx, fmt.Sprint("frozen-", i), 10*time.Second); err == nil {
				t.Errorf("obtained %v on a frozen node", l.Name())
			}
			mu.Lock()
			worst = max(worst, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	start := time.Now()
	_ = c.Close()
	closed := time.Since(start)
	resumed = true
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the slowest of 600 obtains on a frozen node took %v; Close %v", worst, closed)
	if worst > bound || closed > bound {
		t.Errorf("the slowest obtain took %v and Close %v on a frozen node, more than %v", worst, closed, bound)
	}
}
