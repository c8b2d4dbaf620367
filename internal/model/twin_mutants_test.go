package model

import (
	"context"
	"fmt"
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
	// run plays the harness of one kind of script with the mutant twin
	// until it reports a disagreement, and returns it ("" if none).
	harnesses := map[string]func(t *testing.T, mut Mutations) string{
		"plain": func(t *testing.T, mut Mutations) string {
			var failed string
			d := &diff{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, 0x7e)), runs: map[string]int{}, cover: map[string]int{},
				mut: mut, failed: &failed}
			d.nodes[0] = &diffNode{srv: srv, c: c}
			for ops := 0; ops < 600 && failed == ""; ops++ {
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
			return failed
		},
		"permit": func(t *testing.T, mut Mutations) string {
			var failed string
			p := &permitDiff{t: t, ctx: ctx, c: c, mut: mut, failed: &failed}
			p.run(rand.New(rand.NewPCG(seed, 0x80)), 600, map[string]int{})
			return failed
		},
		"family": func(t *testing.T, mut Mutations) string {
			var failed string
			p := &famDiff{t: t, ctx: ctx, c: c, mut: mut, failed: &failed}
			p.run(rand.New(rand.NewPCG(seed, 0x7f)), 3000, map[string]int{})
			return failed
		},
	}
	mutants := []struct {
		harness string
		mut     RetireMutations
	}{
		{"plain", RetireMutations{ReseedIgnoresToken: true}},
		{"plain", RetireMutations{ReleaseKeepsCounter: true}},
		{"family", RetireMutations{ReseedIgnoresToken: true}},
		{"family", RetireMutations{ReleaseKeepsCounter: true}},
		{"family", RetireMutations{HoldReseedUnguarded: true}},
		{"permit", RetireMutations{ReseedIgnoresToken: true}},
		{"permit", RetireMutations{ReleaseKeepsCounter: true}},
	}
	for _, m := range mutants {
		t.Run(fmt.Sprintf("%s/%+v", m.harness, m.mut), func(t *testing.T) {
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			failed := harnesses[m.harness](t, Mutations{RetireMutations: m.mut})
			if failed == "" {
				t.Fatal("the mutant twin agreed with the scripts throughout")
			}
			t.Logf("found: %.300s", failed)
		})
	}
}
