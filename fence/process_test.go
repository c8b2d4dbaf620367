package fence_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

const childEnv = "FENCE_TEST_CHILD"

// childConfig is what a holder process does: obtain the lock on Nodes,
// print its token, read the store's counter when RMW is set, then wait for
// a line on stdin and write the counter (the value read + 1, or "stale")
// at Key of Store, with the package (Fenced) or a plain HSET (the
// control), and print the result.
type childConfig struct {
	Nodes  []string
	Store  string
	Key    string
	Fenced bool
	RMW    bool
}

func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if err := child(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child(cfg childConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nodes []redis.UniversalClient
	for _, a := range cfg.Nodes {
		n := redis.NewClient(&redis.Options{Addr: a})
		defer n.Close()
		nodes = append(nodes, n)
	}
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.Obtain(ctx, "fence-test", time.Second)
	if err != nil {
		return err
	}
	sdb := redis.NewClient(&redis.Options{Addr: cfg.Store})
	defer sdb.Close()
	r := fence.NewRedis(sdb)
	fmt.Printf("token %d\n", l.Token())
	value := "stale"
	if cfg.RMW {
		var v string
		if cfg.Fenced {
			v, _, err = r.Get(ctx, cfg.Key, l.Sequencer())
		} else {
			v, err = sdb.HGet(ctx, cfg.Key, "value").Result()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		n, _ := strconv.Atoi(v)
		value = strconv.Itoa(n + 1)
		fmt.Printf("read %s\n", v)
	}
	// The parent stops this process here (SIGSTOP) until its lock expired.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	if cfg.Fenced {
		err = r.Set(ctx, cfg.Key, l.Sequencer(), value)
	} else {
		err = sdb.HSet(ctx, cfg.Key, "value", value).Err()
	}
	switch {
	case errors.Is(err, fence.ErrStale):
		fmt.Printf("refused %v\n", err)
	case err != nil:
		return err
	default:
		fmt.Println("accepted")
	}
	return nil
}

// TestStalledHolderProcess: a holder process is stopped (SIGSTOP) while it
// holds the lock, until another client obtains the lock, which can only
// happen once the stopped holder's lock has expired; the new holder writes,
// then the stopped one resumes and writes with its old token. The store
// refuses it; with the check off (a plain HSET, the control) the same
// write is accepted. Likewise for a read-modify-write stopped between its
// read and its write: fenced, its stale write is refused (it must do its
// update again); plain, it is accepted, and of the two acknowledged
// increments one is lost.
func TestStalledHolderProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGSTOP")
	}
	srv := redistest.Start(t, 4)
	var addrs []string
	for _, s := range srv[:3] {
		addrs = append(addrs, s.Addr())
	}
	sdb := srv[3].Client()
	t.Cleanup(func() { _ = sdb.Close() })
	var nodes []redis.UniversalClient
	for _, s := range srv[:3] {
		n := s.Client()
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	lc, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close() })
	r := fence.NewRedis(sdb)
	for _, tc := range []struct {
		name        string
		fenced, rmw bool
		want        string // the stopped holder's result
		final       string // the counter at the end
	}{
		{"write", true, false, "refused", "1"},
		{"write-control", false, false, "accepted", "stale"},
		{"rmw", true, true, "refused", "1"},
		{"rmw-control", false, true, "accepted", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "counter:" + tc.name
			got := stalledHolder(t, lc, r, sdb, childConfig{Nodes: addrs, Store: srv[3].Addr(), Key: key, Fenced: tc.fenced, RMW: tc.rmw})
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("the stopped holder's write: %q, want %s", got, tc.want)
			}
			if v := sdb.HGet(context.Background(), key, "value").Val(); v != tc.final {
				t.Fatalf("counter %q, want %q", v, tc.final)
			}
		})
	}
}

// stalledHolder runs the child of cfg, stops it once it holds the lock
// (and has read), obtains the lock here, does the new holder's
// read-modify-write, resumes the child and returns its result line.
func stalledHolder(t *testing.T, lc *redlock.Client, r *fence.Redis, sdb *redis.Client, cfg childConfig) string {
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
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
	out := bufio.NewReader(stdout)
	line := func() string {
		s, err := out.ReadString('\n')
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return strings.TrimSpace(s)
	}
	var old int64
	if _, err := fmt.Sscanf(line(), "token %d", &old); err != nil {
		t.Fatalf("child: %v", err)
	}
	if cfg.RMW {
		line() // "read V"
	}
	if err := redistest.PauseProcess(cmd.Process); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lc.Obtain(ctx, "fence-test", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Token() <= old {
		t.Fatalf("new token %d, not above %d", l.Token(), old)
	}
	// The new holder's read-modify-write.
	var v string
	if cfg.Fenced {
		v, _, err = r.Get(ctx, cfg.Key, l.Sequencer())
		if err == nil {
			n, _ := strconv.Atoi(v)
			err = r.Set(ctx, cfg.Key, l.Sequencer(), strconv.Itoa(n+1))
		}
	} else {
		v = sdb.HGet(ctx, cfg.Key, "value").Val()
		n, _ := strconv.Atoi(v)
		err = sdb.HSet(ctx, cfg.Key, "value", strconv.Itoa(n+1)).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if err := redistest.ResumeProcess(cmd.Process); err != nil {
		t.Fatal(err)
	}
	res := line()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	return res
}
