package fault

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/examples/fenced-storage/store"
	"github.com/redlock-go/redlock/internal/redistest"
)

// childEnv carries a child process's configuration (JSON): the test binary
// re-executes itself as a client that can be paused as a whole.
const childEnv = "REDLOCK_FAULT_CHILD"

type childConfig struct {
	ID        string        `json:"id"`
	Addrs     []string      `json:"addrs"`
	StoreAddr string        `json:"store"`
	Duration  time.Duration `json:"d"`
	TTL       time.Duration `json:"ttl"`
	MaxTTL    time.Duration `json:"maxttl"`
	Hold      time.Duration `json:"hold"`
	Bound     time.Duration `json:"bound"`
	Fenced    bool          `json:"fenced"`
	Guard     bool          `json:"guard"`
	Auto      bool          `json:"auto"`
}

// stdoutSink reports a child's records to its parent, one line each.
type stdoutSink struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (s *stdoutSink) line(kind string, v any) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	fmt.Fprintf(s.w, "%s %s\n", kind, b)
	_ = s.w.Flush()
	s.mu.Unlock()
}

func (s *stdoutSink) addOp(o op)           { s.line("op", o) }
func (s *stdoutSink) addAttempt(a attempt) { s.line("at", a) }
func (s *stdoutSink) hold(d int64)         { s.line("hold", d) }

// runChild is the child's main: one client running the workload.
func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	w := workload{ttl: cfg.TTL, maxTTL: cfg.MaxTTL, hold: cfg.Hold, bound: cfg.Bound, fenced: cfg.Fenced, guard: cfg.Guard, auto: cfg.Auto}
	c, closeFn, err := newLockClient(cfg.Addrs, w, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	sdb := storeClient(cfg.StoreAddr)
	defer func() {
		closeFn()
		_ = sdb.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	runWorker(ctx, cfg.ID, c, store.New(sdb, "counter"), w, nil, false, &stdoutSink{w: bufio.NewWriter(os.Stdout)})
	return 0
}

// child is a client process started by the parent test.
type child struct {
	id      string
	cmd     *exec.Cmd
	holding atomic.Int64
	read    chan struct{} // closed when its output has been read
	bound   time.Duration
}

func startChild(e *env, id string, d time.Duration) (*child, error) {
	cfg := childConfig{ID: id, Addrs: e.addrs, StoreAddr: e.storeDB.Options().Addr, Duration: d,
		TTL: e.w.ttl, MaxTTL: e.w.maxTTL, Hold: e.w.hold, Bound: e.w.bound, Fenced: e.w.fenced, Guard: e.w.guard, Auto: e.w.auto}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &child{id: id, cmd: cmd, read: make(chan struct{}), bound: d + 30*time.Second}
	e.t.Cleanup(func() {
		// Normally a no-op: wait has reaped it.
		_ = redistest.ResumeProcess(cmd.Process)
		_ = cmd.Process.Kill()
	})
	go func() {
		defer close(k.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			kind, body, _ := strings.Cut(sc.Text(), " ")
			switch kind {
			case "op":
				var o op
				if json.Unmarshal([]byte(body), &o) == nil {
					e.rec.addOp(o)
				}
			case "at":
				var a attempt
				if json.Unmarshal([]byte(body), &a) == nil {
					e.rec.addAttempt(a)
				}
			case "hold":
				var d int64
				if json.Unmarshal([]byte(body), &d) == nil {
					k.holding.Add(d)
					e.rec.holding.Add(d)
				}
			}
		}
	}()
	return k, nil
}

// wait reaps the child, killing it if it outlives its bound.
func (k *child) wait() error {
	t := time.NewTimer(k.bound)
	defer t.Stop()
	select {
	case <-k.read:
	case <-t.C:
		_ = redistest.ResumeProcess(k.cmd.Process)
		_ = k.cmd.Process.Kill()
		<-k.read
	}
	return k.cmd.Wait()
}

// pause freezes the whole child process for d (SIGSTOP, SIGCONT): a GC or
// VM pause that no code in the client can notice while it lasts.
func (k *child) pause(d time.Duration) {
	if redistest.PauseProcess(k.cmd.Process) != nil {
		return
	}
	t := time.NewTimer(d)
	<-t.C
	_ = redistest.ResumeProcess(k.cmd.Process)
}
