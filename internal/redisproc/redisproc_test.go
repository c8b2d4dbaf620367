package redisproc

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestStartPauseStop(t *testing.T) {
	servers, err := StartServers(2, Options{})
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer StopAll(servers)
	s := servers[0]
	c := s.Client()
	defer c.Close()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if !FreezeSupported() {
		if err := s.Pause(); !errors.Is(err, ErrFreezeUnsupported) {
			t.Fatalf("Pause without SIGSTOP: %v, want ErrFreezeUnsupported", err)
		}
	} else {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := ping(); err == nil {
			t.Fatal("a paused server answered")
		}
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := ping(); err != nil {
			t.Fatalf("ping after Resume: %v", err)
		}
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	pid, dir := s.Pid(), s.dir
	if err := s.Stop(); err != nil { // a paused server stops too
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind", dir)
	}
	if p, err := os.FindProcess(pid); err == nil && processAlive(p) {
		t.Errorf("process %d still running", pid)
	}
	if s.Pid() != pid {
		// Pid keeps naming the last process; only Restart changes it.
		t.Errorf("Pid after Stop = %d, want %d", s.Pid(), pid)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// Restart brings a stopped server back on its port, empty.
	r := servers[1]
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	rc := r.Client()
	defer rc.Close()
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping after Restart: %v", err)
	}
}

func TestStartServersUnknownOption(t *testing.T) {
	_, err := StartServers(1, Options{Args: []string{"--no-such-option", "x"}})
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err == nil {
		t.Fatal("a server started with an unknown option")
	}
}
