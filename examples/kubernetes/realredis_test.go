//go:build unix

package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// testPassword stands for the Secret's password on the test's servers.
const testPassword = "test-secret-password"

// server is a redis-server process started by a test.
type server struct {
	cmd    *exec.Cmd
	port   int
	args   []string // as given to redis-server, port and dir included
	out    bytes.Buffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited
}

// startRedis starts redis-server with args (the Secret's value replaced by
// testPassword, its --dir by dir), then its port and data directory, and
// the test's own settings, and waits until it answers or has exited. A
// free port can be taken by another process before redis-server binds
// it: then it tries another.
func startRedis(t *testing.T, args []string, dir string, extra ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (make deps installs it):", err)
	}
	var given []string
	for i, a := range args {
		if name, key, ok := secretOf(a); ok && name != "" && key != "" {
			a = testPassword
		}
		if i > 0 && args[i-1] == "--dir" {
			a = dir // redis-server moves to its dir as it reads it
		}
		given = append(given, a)
	}
	for attempt := 1; ; attempt++ {
		s := &server{port: freePort(t), exited: make(chan struct{})}
		s.args = slices.Concat(given, []string{"--port", strconv.Itoa(s.port), "--dir", dir, "--bind", "127.0.0.1", "--logfile", "", "--daemonize", "no"}, extra)
		s.cmd = exec.Command("redis-server", s.args...)
		s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { s.err = s.cmd.Wait(); close(s.exited) }()
		t.Cleanup(func() {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
			_ = s.cmd.Process.Kill()
			<-s.exited
		})
		if s.up(t) || !strings.Contains(s.out.String(), "Address already in use") || attempt == 5 {
			return s
		}
	}
}

// up waits until s answers (true) or has exited (false).
func (s *server) up(t *testing.T) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-s.exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr(), time.Second); err == nil {
			c.Close()
			return true
		}
	}
	t.Fatalf("redis-server %q neither answers nor exits", s.args)
	return false
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// conn is a connection to a test's server, authenticated when the server
// has a password.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

// dial connects to s, which must be up.
func (s *server) dial(t *testing.T, password string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr(), 5*time.Second)
	if err != nil {
		select {
		case <-s.exited:
			t.Fatalf("redis-server %q exited: %v\n%s", s.args, s.err, s.out.String())
		default:
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cn := &conn{c, bufio.NewReader(c)}
	if password != "" {
		if _, err := cn.do("AUTH", password); err != nil {
			t.Fatal(err)
		}
	}
	return cn
}

// do sends one command and reads its reply: a string, an integer, nil, a
// list of replies, or an error reply as an error.
func (cn *conn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = cn.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := cn.c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return cn.read()
}

func (cn *conn) read() (any, error) {
	line, err := cn.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(cn.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(body)
		list := make([]any, 0, max(n, 0))
		for range n {
			v, err := cn.read()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// configGet is CONFIG GET name's value.
func (cn *conn) configGet(t *testing.T, name string) string {
	t.Helper()
	v, err := cn.do("CONFIG", "GET", name)
	list, ok := v.([]any)
	if err != nil || !ok || len(list) != 2 {
		t.Fatalf("CONFIG GET %s: %v %v", name, v, err)
	}
	return list[1].(string)
}

// modelValue is what the test's reading of redis-server's arguments says
// CONFIG GET name returns, given redis-server's defaults.
func modelValue(rc redisConfig, name string) string {
	defaults := map[string]string{"appendonly": "no", "appendfsync": "everysec", "maxmemory-policy": "noeviction", "maxmemory": "0"}
	v, ok := rc.get(name)
	switch {
	case !ok:
		return defaults[name]
	case name == "maxmemory":
		b, _ := redisBytes(v[0])
		return strconv.FormatInt(b, 10)
	case name == "replicaof" && strings.EqualFold(strings.Join(v, " "), "no one"):
		return ""
	case name == "requirepass" || name == "replicaof":
		return strings.Join(v, " ")
	}
	return strings.ToLower(strings.Join(v, " "))
}

// redisArgsCases are redis-server command lines whose reading the test
// compares with redis-server's: the example's, each mutation's that
// changes them, and a few the mutations do not write.
func redisArgsCases(t *testing.T) map[string][]string {
	t.Helper()
	base := load(t)
	example, ok := findNodes(base, &report{})
	if !ok {
		t.Fatal("the example has no Redis nodes")
	}
	cases := map[string][]string{"the example": example.proc.argv[1:]}
	for _, m := range mutations {
		files := readFiles(t)
		for _, e := range m.edits {
			if err := e.apply(files); err != nil {
				t.Fatal(err)
			}
		}
		o, err := parse(files)
		if err != nil {
			continue
		}
		if nd, ok := findNodes(o, &report{}); ok && strings.Join(nd.proc.argv, "\x01") != strings.Join(example.proc.argv, "\x01") {
			cases[m.name] = nd.proc.argv[1:]
		}
	}
	extra := map[string][]string{
		"--save followed by a flag":             {"--save", "--appendonly", "yes"},
		"--save last":                           {"--appendonly", "yes", "--save"},
		"a quoted value in one argument":        {"--requirepass \"two words\""},
		"a directive name in upper case":        {"--APPENDONLY", "yes", "--appendfsync", "always"},
		"slaveof, the old name of replicaof":    {"--slaveof", "10.0.0.1", "6379", "--replicaof", "no", "one"},
		"a value that starts with --":           {"--requirepass", "--appendonly"},
		"a flag with no value before another":   {"--appendonly", "--appendfsync", "always"},
		"maxmemory in kb, m and gb":             {"--maxmemory", "300kb", "--maxmemory", "3m"},
		"an unbalanced quote in a name":         {"--appendonly \"yes"},
		"a closing quote followed by a letter":  {"--maxmemory-policy 'noeviction'x"},
		"the last of three --maxmemory-policy":  {"--maxmemory-policy", "allkeys-lru", "--maxmemory-policy", "volatile-ttl", "--maxmemory-policy", "noeviction"},
		"\"--appendfsync always\" then a value": {"--appendfsync always", "extra"},
	}
	for name, args := range extra {
		cases[name] = args
	}
	return cases
}

// TestRedisReadsArgsAsTheTestDoes starts redis-server with each command
// line of redisArgsCases and checks that it refuses those the test says
// it refuses, and that CONFIG GET returns what the test read for every
// setting the checks use.
func TestRedisReadsArgsAsTheTestDoes(t *testing.T) {
	for name, args := range redisArgsCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if rc := parseRedisArgs(args); rc.unread != "" {
				t.Skipf("reads %s, which neither the test nor this check can see", rc.unread)
			}
			s := startRedis(t, args, t.TempDir())
			rc := parseRedisArgs(s.args)
			select {
			case <-s.exited:
				if len(rc.errs) == 0 {
					t.Fatalf("redis-server refused %q, which the test reads without error: %v\n%s", args, s.err, s.out.String())
				}
				if s.err == nil {
					t.Errorf("the test says redis-server refuses %q (%v), yet it exited 0", args, rc.errs)
				}
				return
			default:
				if len(rc.errs) > 0 {
					t.Fatalf("the test says redis-server refuses %q (%v), yet it runs", args, rc.errs)
				}
			}
			password := modelValue(rc, "requirepass")
			cn := s.dial(t, password)
			for _, setting := range []string{"appendonly", "appendfsync", "maxmemory-policy", "maxmemory", "replicaof", "requirepass"} {
				if got, want := cn.configGet(t, setting), modelValue(rc, setting); got != want {
					t.Errorf("%q: CONFIG GET %s = %q, the test read %q", args, setting, got, want)
				}
			}
		})
	}
}

// runProbe runs a probe's command as the kubelet does, in the container's
// environment, against server s (redis-cli given its port), within the
// probe's timeoutSeconds. It reports whether the probe passed, and how
// long it took.
func runProbe(p *corev1.Probe, env []string, s *server) (bool, time.Duration) {
	within := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var argv []string
	for _, a := range p.Exec.Command {
		argv = append(argv, strings.ReplaceAll(a, "redis-cli", "redis-cli -p "+strconv.Itoa(s.port)))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	err := cmd.Run()
	return err == nil, time.Since(start)
}
