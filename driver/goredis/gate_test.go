package goredis

import (
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// gatesLen counts the registry's entries.
func gatesLen() int {
	gates.mu.Lock()
	defer gates.mu.Unlock()
	return len(gates.m)
}

// The registry of gates holds neither clients nor gates: once a client
// wrapped by New is closed and dropped, with its Nodes, its entry goes.
// Nodes on one client share one gate, and the client gets one hook.
func TestGateRegistryForgetsClients(t *testing.T) {
	before := gatesLen()
	func() {
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		a, b := New(rc), New(rc)
		if a.g != b.g {
			t.Error("two Nodes on one client have gates of their own")
		}
		if got := gatesLen(); got != before+1 {
			t.Errorf("the registry has %d entries after two Nodes on one client, want %d", got, before+1)
		}
		_ = rc.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for gatesLen() > before {
		if time.Now().After(deadline) {
			t.Fatalf("the registry still has %d entries, want %d: a dropped client's entry stayed", gatesLen(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
