package model

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// TestIdentifyTwinMatchesScript holds the model's id.lua twin
// (Data.Identify) to the script on a real redis-server: random first
// contacts, reads, and losses of the data set (the identity key deleted,
// as a restart without data does; or kept, as a restart with the data, a
// snapshot or a replica does). The script's identities are random strings
// and the model's numbers: each must keep its identity while the key
// lives, and take a new one, never an earlier one, after it is lost.
func TestIdentifyTwinMatchesScript(t *testing.T) {
	seed := seedOf(t)
	t.Logf("seed %d (replay: %s=%d)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 44))
	srv := redistest.Start(t, 1)[0]
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	node := goredis.New(c)
	ctx := context.Background()
	key := keys.Layout{Prefix: "d"}.NodeID()
	var twin Data
	next := 1
	seenReal, seenModel := map[string]bool{}, map[int]bool{}
	lastReal, lastModel := "", 0
	cover := map[string]int{}
	for step := range 300 {
		if rng.IntN(4) == 0 {
			// The data set is lost: a restart without data.
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			twin = Data{}
			cover["lost"]++
		}
		id, err := script.Identify(ctx, node, key)
		if err != nil {
			t.Fatal(err)
		}
		got := twin.Identify(next)
		if got == next {
			next++
		}
		newReal, newModel := id.ID != lastReal, got != lastModel
		if newReal != newModel || (newReal && (seenReal[id.ID] || seenModel[got])) {
			t.Fatalf("step %d: script %q (before %q), twin %d (before %d)", step, id.ID, lastReal, got, lastModel)
		}
		if newReal {
			cover["new"]++
		} else {
			cover["kept"]++
		}
		seenReal[id.ID], seenModel[got] = true, true
		lastReal, lastModel = id.ID, got
	}
	t.Logf("cover: %v", cover)
	for _, k := range []string{"lost", "new", "kept"} {
		if cover[k] == 0 {
			t.Errorf("no step with %s", k)
		}
	}
}
