package model

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// The differential tests would not notice twins that left out the retired
// token (issue 44, finding G) if they never met its branches: each mutant
// of RetireMutations, run against the real scripts by the test's own
// harness, must make it report a disagreement within a few hundred
// operations. (The explorer does not see these mutants: they cost
// liveness only.)
func TestTwinMutantsDisagree(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	seed := diffSeedOf(t)
	plain := []struct {
		name string
		mut  Mutations
	}{
		{"plain/ReseedIgnoresToken", Mutations{RetireMutations: RetireMutations{ReseedIgnoresToken: true}}},
		{"plain/ReleaseKeepsCounter", Mutations{RetireMutations: RetireMutations{ReleaseKeepsCounter: true}}},
	}
	for _, m := range plain {
		t.Run(m.name, func(t *testing.T) {
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			var failed string
			d := &diff{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, 0x7e)), runs: map[string]int{}, cover: map[string]int{},
				mut: m.mut, failed: &failed}
			d.nodes[0] = &diffNode{srv: srv, c: c}
			ops := 0
			for ; ops < 600 && failed == ""; ops++ {
				switch x := d.rng.IntN(10); {
				case x < 4:
					d.acquire()
				case x < 6:
					d.refresh()
				case x < 8:
					d.release()
				default:
					time.Sleep(time.Duration([]int{1, 5, 25}[d.rng.IntN(3)]) * time.Millisecond)
				}
			}
			if failed == "" {
				t.Fatalf("the mutant twin agreed with the scripts for %d operations", ops)
			}
			t.Logf("found after %d operations: %.200s", ops, failed)
		})
	}
}
