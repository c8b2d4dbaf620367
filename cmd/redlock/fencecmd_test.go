package main

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFenceReset: an operator resets a fence that a forged token raised,
// to a token (--token), to the lock's latest token read from its nodes
// (--latest: the holder's token passes again, a stale one does not), and
// to nothing (--forget); inspect shows the record.
func TestFenceReset(t *testing.T) {
	servers := redistest.Start(t, 4)
	nodes := "--nodes=" + nodesFlag(servers[:3]...)
	store := "--store=redis://" + servers[3].Addr()
	sc := servers[3].Client()
	t.Cleanup(func() { _ = sc.Close() })
	r := fence.NewRedis(sc)
	ctx := context.Background()
	l := holdLock(t, "acct", time.Minute, servers[:3]...)
	if err := r.Set(ctx, "acct", l.Sequencer(), "v"); err != nil {
		t.Fatal(err)
	}
	poison := fence.Sequencer{Lock: "acct", Kind: "plain", Token: math.MaxInt64}
	if _, _, err := r.Get(ctx, "acct", poison); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, "fence", "inspect", store, "acct")
	if res.code != exitOK || !strings.Contains(res.stdout, "9223372036854775807") || !strings.Contains(res.stdout, `lock "acct"`) {
		t.Fatalf("inspect: %v", res)
	}
	res = runCLI(t, "fence", "reset", store, nodes, "--latest", "acct")
	if res.code != exitOK {
		t.Fatalf("reset --latest: %v", res)
	}
	st, err := r.Inspect(ctx, "acct")
	if err != nil || st.Fence < l.Token() || st.Lock != "acct" {
		t.Fatalf("after reset --latest: %+v, %v; want a fence at or above the holder's token %d", st, err, l.Token())
	}
	stale := fence.Sequencer{Lock: "acct", Kind: "plain", Token: l.Token() - 1}
	if err := r.Set(ctx, "acct", stale, "stale"); err == nil {
		t.Error("a stale holder after reset --latest: accepted")
	}
	res = runCLI(t, "fence", "reset", store, "--token", strconv.FormatInt(l.Token(), 10), "--json", "acct")
	var out struct {
		State  fence.State
		Before *fence.State
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); res.code != exitOK || err != nil || out.State.Fence != l.Token() || out.Before == nil {
		t.Fatalf("reset --token: %v (%v)", res, err)
	}
	if err := r.Set(ctx, "acct", l.Sequencer(), "v2"); err != nil {
		t.Errorf("the holder after reset --token: %v", err)
	}
	if res := runCLI(t, "fence", "reset", store, "--forget", "acct"); res.code != exitOK {
		t.Fatalf("reset --forget: %v", res)
	}
	if st, _ := r.Inspect(ctx, "acct"); st.Fence != 0 || st.Lock != "" {
		t.Errorf("after reset --forget: %+v", st)
	}
	for _, args := range [][]string{
		{"fence", "reset", store, "acct"},
		{"fence", "reset", store, "--token", "5", "--forget", "acct"},
		{"fence", "reset", store, "--token", "x", "acct"},
		{"fence", "inspect", "acct"},
		{"fence", "erase", store, "acct"},
		{"fence", "reset", store, "--latest", "acct"}, // follows no lock since --forget
	} {
		if res := runCLI(t, args...); res.code != exitUsage {
			t.Errorf("%v: %v, want exit 2", args, res)
		}
	}
}
