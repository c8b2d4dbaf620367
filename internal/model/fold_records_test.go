package model

import (
	"testing"
	"time"
)

// TestFoldRecordsMutants: the searches find the fold's decision left out:
// its conflict, its move floor (and the write round that raises it).
func TestFoldRecordsMutants(t *testing.T) {
	for name, mut := range map[string]Mutations{
		"FoldNoConflict": {JointMutations: JointMutations{FoldNoConflict: true}},
		"FoldNoFloor":    {JointMutations: JointMutations{FoldNoFloor: true}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, aim := range []bool{false, true} {
				s := search{name: "unified", cfg: unified, random: 15000, steps: 8000, swarm: true, deadline: 5 * time.Minute}
				if aim {
					s.aim = handoffWindow
				}
				for _, seed := range fixedSeeds(4) {
					ce, st := s.run(mut, seed, 3000)
					t.Logf("aim %v seed %d: %+v found=%v", aim, seed, st, ce != nil)
					if ce != nil {
						t.Logf("%s", ce)
						return
					}
				}
			}
			t.Fatalf("%s not found", name)
		})
	}
}
