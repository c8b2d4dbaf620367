package faultproxy

import (
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts an echo server and returns its address, and a channel
// that receives a value each time the server reads.
func echo(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	read := make(chan struct{}, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				b := make([]byte, 512)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					select {
					case read <- struct{}{}:
					default:
					}
					if _, err := c.Write(b[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), read
}

// proxied starts a proxy to target and dials it; cleanups close both.
func proxied(t *testing.T, target string) (*Proxy, net.Conn) {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

func roundTrip(c net.Conn, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	b := make([]byte, 1)
	_, err := c.Read(b)
	return err
}

func TestModes(t *testing.T) {
	addr, _ := echo(t)
	p, c := proxied(t, addr)
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("latency: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("round trip with 100ms each way took %v", d)
	}
	p.Heal()
	p.SetBlackhole(true)
	if err := roundTrip(c, 200*time.Millisecond); err == nil {
		t.Fatal("blackhole: a reply came back")
	}
	p.Heal()
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
	p.Heal()
	p.Reset()
	if err := roundTrip(c, time.Second); err == nil {
		t.Fatal("reset: the old connection still works")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(c2, time.Second); err != nil {
		t.Fatalf("after reset, new connection: %v", err)
	}
}

// With replies dropped, requests still reach the server.
func TestDropReplies(t *testing.T) {
	addr, read := echo(t)
	p, c := proxied(t, addr)
	p.SetDropReplies(true)
	if err := roundTrip(c, 200*time.Millisecond); err == nil {
		t.Fatal("a reply came back")
	}
	select {
	case <-read:
	case <-time.After(time.Second):
		t.Fatal("the request did not reach the server")
	}
}
