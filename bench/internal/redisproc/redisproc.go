// Package redisproc starts and stops redis-server processes on free loopback
// ports for the benchmarks: no persistence, each in its own temporary
// directory, killed with this process if it dies first.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	Addr string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}

	mu      sync.Mutex
	frozen  bool
	stopped bool
}

// Start starts n servers. On error, the servers already started are
// stopped. The caller must Stop every returned server.
func Start(n int) ([]*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-server is not installed: %w", err)
	}
	var servers []*Server
	for range n {
		s, err := start(bin)
		if err != nil {
			StopAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// StopAll stops every server, ignoring errors.
func StopAll(servers []*Server) {
	for _, s := range servers {
		_ = s.Stop()
	}
}

func start(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redlock-bench-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	var last error
	// A port found free can be taken before the server binds it: retry.
	for range 5 {
		port, err := freePort()
		if err != nil {
			last = err
			continue
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
		s.cmd = exec.Command(bin,
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--logfile", "redis.log",
			"--daemonize", "no",
			"--protected-mode", "no",
		)
		s.cmd.Dir = dir
		// Own process group (a terminal's Ctrl-C reaches only us, and we
		// stop the servers); SIGKILL if this process dies first.
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := s.cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redisproc: start redis-server: %w", err)
		}
		s.exited = make(chan struct{})
		go func() {
			_ = s.cmd.Wait()
			close(s.exited)
		}()
		if last = s.waitReady(); last == nil {
			return s, nil
		}
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

func (s *Server) waitReady() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redisproc: redis-server on %s exited at start", s.Addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: redis-server on %s not ready: %w", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Freeze stops the process with SIGSTOP: its sockets stay open, it answers
// nothing.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP, true) }

// Thaw resumes a frozen process with SIGCONT.
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, frozen bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("redisproc: %s is stopped", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redisproc: signal %s: %w", s.Addr, err)
	}
	s.frozen = frozen
	return nil
}

// Stop kills the server (thawing it first), waits for it and removes its
// directory. It is safe to call more than once.
func (s *Server) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	if s.frozen {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	err := s.cmd.Process.Signal(syscall.SIGKILL)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisproc: kill %s: %w", s.Addr, err)
	}
	<-s.exited
	return os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
