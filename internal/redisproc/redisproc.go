// Package redisproc starts and stops real redis-server and redis-sentinel
// processes on free loopback ports: the one process harness of the
// repository, used by the tests (through internal/redistest, which adds the
// testing.TB helpers), the CLI's demo and bench nodes, the examples and the
// comparative benchmarks. It does not import testing, so a binary that uses
// it does not link the test framework.
//
// Servers run without persistence, so a restart comes back empty, as after
// a crash of a node without AOF. Every Server is owned by whoever started
// it: Stop kills the process and removes its directory.
//
// It builds on every platform Go supports. Freezing a process (Pause,
// Resume) needs SIGSTOP and SIGCONT: on systems without them (Windows),
// Pause returns an error that wraps ErrFreezeUnsupported.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled is returned when redis-server or redis-sentinel is not on
// the PATH.
var ErrNotInstalled = errors.New("redisproc: redis-server or redis-sentinel is not installed (on Debian: apt-get install redis-server redis-sentinel redis-tools)")

// readyTimeout bounds how long a starting server may take to answer PING.
const readyTimeout = 10 * time.Second

// Server is one redis-server (or redis-sentinel) process on 127.0.0.1
// (or the loopback address Options.Host names).
type Server struct {
	bin  string
	dir  string
	host atomic.Pointer[string] // the address it binds; nil or "" is 127.0.0.1
	port int
	argv func(*Server) []string // the program's arguments

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	paused  bool
	stopped bool
}

// Options configure a Server. The zero value starts a plain master without
// persistence.
type Options struct {
	// Args are extra redis-server arguments, such as
	// []string{"--maxmemory-policy", "allkeys-lru"}.
	Args []string
	// Host is the loopback address the server binds, such as 127.0.0.2
	// (Linux routes all of 127.0.0.0/8 to the loopback interface; other
	// systems may have 127.0.0.1 only); "" is 127.0.0.1. MoveTo moves it.
	Host string
}

// StartServer starts one redis-server on a free loopback port and waits
// until it answers PING. The caller must call Stop.
func StartServer(opts Options) (*Server, error) {
	return launch("redis-server", opts.Host, nil, func(s *Server) []string {
		args := []string{
			"--port", strconv.Itoa(s.port),
			"--bind", s.hostname(),
			"--save", "",
			"--appendonly", "no",
			"--dir", s.dir,
			"--logfile", "redis.log",
			"--daemonize", "no",
			"--protected-mode", "no",
		}
		return append(args, opts.Args...)
	})
}

// launch starts program in a new directory on a free port: prepare (when
// set) readies the directory once the port is known, argv gives the
// arguments.
func launch(program, host string, prepare func(*Server) error, argv func(*Server) []string) (*Server, error) {
	bin, err := exec.LookPath(program)
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	s := &Server{bin: bin, dir: dir, argv: argv}
	s.host.Store(&host)
	// A free port found by listening on :0 can be taken by someone else
	// before the server binds it; try a few ports before giving up.
	for try := 0; ; try++ {
		s.port, err = freePort(s.hostname())
		if err == nil && prepare != nil {
			err = prepare(s)
		}
		if err == nil {
			err = s.start()
		}
		if err == nil {
			return s, nil
		}
		if try == 4 {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.hostname(), strconv.Itoa(s.port)) }

// hostname is the address the server binds.
func (s *Server) hostname() string {
	if h := s.host.Load(); h != nil && *h != "" {
		return *h
	}
	return "127.0.0.1"
}

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Client returns a new go-redis client for the server, with context
// deadlines honoured. The caller must close it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
}

// Pid is the process id of the running server, or 0.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.argv(s)...)
	cmd.Dir = s.dir
	// Where the system allows: its own process group, so that a terminal's
	// Ctrl-C does not reach it and Stop can always clean up, and (Linux)
	// killed with this process if it dies first (a test binary that times
	// out), so that no server is orphaned.
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.paused, s.stopped = cmd, exited, false, false
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	return nil
}

func (s *Server) waitReady(exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redisproc: %s on port %d exited at start: %s", filepath.Base(s.bin), s.port, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: %s on port %d not ready after %v: %v", filepath.Base(s.bin), s.port, readyTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// Kill kills the process (SIGKILL on Unix) and waits for it to exit: a crash. Its data is
// gone (no persistence). Kill of a stopped server is a no-op.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited, stopped := s.cmd, s.exited, s.stopped
	s.stopped = true
	s.paused = false
	s.mu.Unlock()
	if stopped || cmd == nil {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisproc: kill %s: %w", s.Addr(), err)
	}
	<-exited
	return nil
}

// Restart starts the server again on the same port and directory after
// Kill, with a new run_id. It comes back with what its persistence kept
// there (its last snapshot, or its append-only file with --appendonly
// yes), and empty if the server never saved.
func (s *Server) Restart() error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		if err := s.Kill(); err != nil {
			return err
		}
	}
	return s.start()
}

// MoveTo kills the server and starts it again on the same port and
// directory but bound to host (a loopback address, see Options.Host): a
// node that comes back on a new IP address, as a Kubernetes Pod does. It
// keeps its data only with persistence (Options.Args with --appendonly
// yes). On error the server is left stopped.
func (s *Server) MoveTo(host string) error {
	if err := s.Kill(); err != nil {
		return err
	}
	s.host.Store(&host)
	return s.start()
}

// Pause freezes the process with SIGSTOP: it keeps its sockets open but
// answers nothing, like a node in a long GC or swap storm. Where there is
// no SIGSTOP (Windows), it returns an error wrapping ErrFreezeUnsupported.
func (s *Server) Pause() error { return s.freeze(true) }

// Resume undoes Pause with SIGCONT.
func (s *Server) Resume() error { return s.freeze(false) }

// ErrFreezeUnsupported is wrapped by Pause and Resume on systems without
// SIGSTOP and SIGCONT.
var ErrFreezeUnsupported = errors.New("redisproc: freezing a process needs SIGSTOP and SIGCONT, which this system does not have")

// FreezeSupported reports whether Pause and Resume work on this system.
func FreezeSupported() bool { return canFreeze }

func (s *Server) freeze(pause bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cmd == nil {
		return fmt.Errorf("redisproc: %s is not running", s.Addr())
	}
	if err := signalFreeze(s.cmd.Process, pause); err != nil {
		return fmt.Errorf("redisproc: freeze %s: %w", s.Addr(), err)
	}
	s.paused = pause
	return nil
}

// Stop kills the server (resuming it first if paused) and removes its
// directory. It is safe to call more than once.
func (s *Server) Stop() error {
	s.mu.Lock()
	if s.paused && s.cmd != nil {
		_ = signalFreeze(s.cmd.Process, false)
		s.paused = false
	}
	s.mu.Unlock()
	err := s.Kill()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartServers starts n servers with the same options. On error, the
// servers already started are stopped. The caller must Stop every returned
// server (StopAll).
func StartServers(n int, opts Options) ([]*Server, error) {
	servers := make([]*Server, 0, n)
	for range n {
		s, err := StartServer(opts)
		if err != nil {
			StopAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// Addrs lists the servers' addresses (host:port).
func Addrs[S interface{ Addr() string }](servers []S) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// StopAll stops every server, ignoring errors.
func StopAll(servers []*Server) {
	for _, s := range servers {
		_ = s.Stop()
	}
}

// PauseProcess freezes any process with SIGSTOP, as Server.Pause does a
// server: for tests that pause a client process. It returns an error
// wrapping ErrFreezeUnsupported where there is no SIGSTOP.
func PauseProcess(p *os.Process) error { return signalFreeze(p, true) }

// ResumeProcess undoes PauseProcess with SIGCONT.
func ResumeProcess(p *os.Process) error { return signalFreeze(p, false) }
