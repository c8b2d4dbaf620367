package goredis

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// refusalsLen counts the registry's entries.
func refusalsLen() int {
	refusals.mu.Lock()
	defer refusals.mu.Unlock()
	return len(refusals.m)
}

// The registry of refusals holds neither clients nor refusals: once a client
// wrapped by New is closed and dropped, with its Nodes, its entry goes.
// Nodes on one client share one refusal, and the client gets one hook.
func TestGateRegistryForgetsClients(t *testing.T) {
	before := refusalsLen()
	func() {
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		a, b := New(rc), New(rc)
		if a.g != b.g {
			t.Error("two Nodes on one client have refusals of their own")
		}
		if got := refusalsLen(); got != before+1 {
			t.Errorf("the registry has %d entries after two Nodes on one client, want %d", got, before+1)
		}
		_ = rc.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for refusalsLen() > before {
		if time.Now().After(deadline) {
			t.Fatalf("the registry still has %d entries, want %d: a dropped client's entry stayed", refusalsLen(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// A refusal's error says how long the outage had lasted when it was
// seen, not when it is printed: a breaker's error quotes a node's last
// error long after it came (a CI log once read "refused connections for
// 1.282s" of a node back for more than a second).
func TestRefusalErrorKeepsItsDuration(t *testing.T) {
	var g refusal
	g.refuse(fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
	first := g.err().Error()
	time.Sleep(30 * time.Millisecond)
	if later := g.err().Error(); later != first {
		t.Fatalf("the same refusal printed %q, then %q", first, later)
	}
	g.refuse(fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
	if again := g.err().Error(); again == first || strings.Contains(again, "for 0s") {
		t.Fatalf("a second refusal 30 ms into the outage: %q, want its duration then (the first: %q)", again, first)
	}
}
