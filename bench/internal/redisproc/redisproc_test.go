package redisproc

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartFreezeStop(t *testing.T) {
	servers, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer StopAll(servers)
	s := servers[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err == nil {
		t.Fatal("a frozen server answered")
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Fatalf("ping after thaw: %v", err)
	}
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	pid, dir := s.Pid(), s.dir
	if err := s.Stop(); err != nil { // a frozen server stops too
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind", dir)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("process %d still running", pid)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
