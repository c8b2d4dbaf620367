//go:build linux

package netlab

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestLab starts a TCP echo in one namespace (this test binary, re-run as
// a child with ip netns exec) and checks that the lab carries, drops and
// delays packets between it and the root.
func TestLab(t *testing.T) {
	if addr := os.Getenv("NETLAB_ECHO"); addr != "" {
		echo(addr)
		return
	}
	l, err := New([]string{"a"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if out, _ := exec.Command("ip", "netns", "list").Output(); bytes.Contains(out, []byte(l.prefix)) {
			t.Errorf("namespaces left after Close:\n%s", out)
		}
	})
	addr := net.JoinHostPort(l.Addr("a"), "7777")
	cmd := l.Command("a", os.Args[0], "-test.run=^TestLab$")
	cmd.Env = append(os.Environ(), "NETLAB_ECHO="+addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err = net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial the namespace: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	rtt := func() (time.Duration, error) {
		start := time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var b [1]byte
		_, err := c.Read(b[:])
		return time.Since(start), err
	}
	if _, err := rtt(); err != nil {
		t.Fatalf("no echo through the lab: %v", err)
	}
	if err := l.Set(Root, "a", Policy{Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if d, err := rtt(); err != nil || d < 300*time.Millisecond {
		t.Errorf("with 300ms of delay: rtt %v, %v", d, err)
	}
	if err := l.SetBoth(Root, "a", Policy{Drop: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := rtt(); err == nil {
		t.Error("an echo crossed a dropped link")
	}
	l.ClearAll()
	// The connection survived the partition: TCP retransmits.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		t.Errorf("the connection did not survive the partition: %v", err)
	}
	if f, d := l.Stats(); f == 0 || d == 0 {
		t.Errorf("stats: %d forwarded, %d dropped", f, d)
	}
}

func echo(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(3)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			b := make([]byte, 1024)
			for {
				n, err := c.Read(b)
				if err != nil {
					return
				}
				_, _ = c.Write(b[:n])
			}
		}()
	}
}
