package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// servers are local redis-server processes, without persistence, on free
// loopback ports.
type servers struct {
	addrs []string
	procs []*exec.Cmd
	dirs  []string
	done  []chan struct{}
}

// startServers starts n redis-server processes; the caller must call stop.
func startServers(n int) (*servers, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on the PATH: install it, or give -nodes")
	}
	s := &servers{}
	for range n {
		if err := s.start(bin); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *servers) start(bin string) error {
	dir, err := os.MkdirTemp("", "redlock-metrics-")
	if err != nil {
		return err
	}
	s.dirs = append(s.dirs, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no")
	// Own process group, so that Ctrl-C reaches only this program, which
	// stops the servers; killed with it if it dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.procs, s.done = append(s.procs, cmd), append(s.done, done)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.addrs = append(s.addrs, addr)

	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start", port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d not ready: %w", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the servers and removes their directories.
func (s *servers) stop() {
	for i, cmd := range s.procs {
		_ = cmd.Process.Kill()
		<-s.done[i]
	}
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
}
