package repro

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// resumeChild is the worker of TestHandoffAcrossProcesses: it reads a
// handoff from stdin, resumes the lock with automatic refresh, says so
// with its token, keeps it until told to release it on stdin, and releases
// it. A handoff it cannot resume is reported with the error.
func resumeChild() int {
	var nodes []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_CHILD_NODES"), ",") {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return 0
		}
		l, err := c.Resume(context.Background(), []byte(strings.TrimSpace(line)), redlock.WithAutoRefresh())
		if err != nil {
			fmt.Printf("refused not-held=%v invalid=%v: %v\n", errors.Is(err, redlock.ErrNotHeld), errors.Is(err, redlock.ErrInvalid), err)
			continue
		}
		fmt.Println("resumed", l.Name(), l.Token())
		if _, err := in.ReadString('\n'); err != nil { // "release"
			return 0
		}
		fmt.Println("released", l.Release(context.Background()))
	}
}

// A scheduler obtains a lock and hands it to a worker process, which
// resumes it, keeps it alive past its first TTL and releases it; forged,
// stale and foreign handoffs are refused.
func TestHandoffAcrossProcesses(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			var addrs []string
			for _, s := range cl.servers {
				addrs = append(addrs, s.Addr())
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "REDLOCK_CHILD=resume", "REDLOCK_CHILD_NODES="+strings.Join(addrs, ","))
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
				_ = stdin.Close()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			lines := make(chan string, 8)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			say := func(s string) {
				t.Helper()
				if _, err := io.WriteString(stdin, s+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			next := func() string {
				t.Helper()
				select {
				case l := <-lines:
					return l
				case <-time.After(30 * time.Second):
					t.Fatal("no word from the worker in 30s")
				}
				return ""
			}

			ctx := context.Background()
			c := newClient(t, cl.clients)
			other := newClient(t, cl.clients)
			for _, h := range []struct {
				label string
				redlock.Locker
			}{{"plain", c.Mutex("job")}, {"reentrant", c.Reentrant("rjob", "run-9")}, {"permit", c.Semaphore("sjob", 2)}, {"write", writer(c, "wjob")}} {
				l, err := h.Obtain(ctx, 2*time.Second, redlock.WithAutoRefresh())
				if err != nil {
					t.Fatal(err)
				}
				data, err := l.Handoff()
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Err(); !errors.Is(err, redlock.ErrNotHeld) {
					t.Fatalf("%s: Err after Handoff: %v, want ErrNotHeld", h.label, err)
				}
				say(string(data))
				if got, want := next(), fmt.Sprintf("resumed %s %d", l.Name(), l.Token()); got != want {
					t.Fatalf("%s: worker says %q, want %q", h.label, got, want)
				}
				// The handed-off lock here does not release it, nor does
				// this Client's Close later.
				if err := l.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
					t.Fatalf("%s: Release of a handed-off lock: %v, want ErrNotHeld", h.label, err)
				}
				// Past the lock's first TTL the worker still holds it.
				time.Sleep(2500 * time.Millisecond)
				contender := map[string]redlock.Locker{
					"plain": other.Mutex(l.Name()), "reentrant": other.Reentrant(l.Name(), "run-10"),
					"write": writer(other, l.Name()), "permit": other.Semaphore(l.Name(), 1),
				}[h.label]
				if h.label == "permit" {
					// Of two permits, one is the worker's: one is left.
					p, err := other.Semaphore(l.Name(), 2).TryObtain(ctx, time.Minute)
					if err != nil {
						t.Fatalf("permit: the second permit: %v", err)
					}
					contender = other.Semaphore(l.Name(), 2)
					defer p.Release(ctx)
				}
				if _, err := contender.TryObtain(ctx, time.Minute); !errors.Is(err, redlock.ErrHeld) {
					t.Fatalf("%s: another owner of %s while the worker held it: %v, want ErrHeld", h.label, l.Name(), err)
				}
				say("release")
				if got := next(); got != "released <nil>" {
					t.Fatalf("%s: worker says %q, want its release", h.label, got)
				}
			}

			// Forged: a secret nobody holds.
			l, err := c.TryObtain(ctx, "forged", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			// The form of another plain lock, handed off, given the held
			// lock's name, a secret nobody holds and token 1.
			model, err := c.TryObtain(ctx, "forged-model", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			form, err := model.Handoff()
			if err != nil {
				t.Fatal(err)
			}
			data := edit(t, form, map[string]any{"name": "forged", "secret": "0123456789abcdef", "token": 1})
			say(string(data))
			if got := next(); !strings.HasPrefix(got, "refused not-held=true") {
				t.Fatalf("forged handoff: worker says %q, want a refusal with ErrNotHeld", got)
			}
			// Stale: handed off, then expired before it was resumed.
			s, err := c.TryObtain(ctx, "stale", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			stale, err := s.Handoff()
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond)
			say(string(stale))
			if got := next(); !strings.HasPrefix(got, "refused not-held=true") {
				t.Fatalf("stale handoff: worker says %q, want a refusal with ErrNotHeld", got)
			}
			// Foreign: another prefix.
			foreign := edit(t, stale, map[string]any{"prefix": "other:"})
			say(string(foreign))
			if got := next(); !strings.HasPrefix(got, "refused not-held=false invalid=true") {
				t.Fatalf("foreign handoff: worker says %q, want a refusal with ErrInvalid", got)
			}
		})
	}
}

// edit returns the handoff form with the given fields set, each of which
// the form must have: the fields of a form, as Handoff writes it, are what
// a test can forge.
func edit(t *testing.T, form []byte, set map[string]any) []byte {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(form, &f); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if _, ok := f[k]; !ok {
			t.Fatalf("the handoff form %s has no field %q", form, k)
		}
		f[k] = v
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
