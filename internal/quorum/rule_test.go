package quorum

import "testing"

// TestRule: a count of one set, and a joint rule whose shared nodes count
// for both sets (five nodes becoming {0,1,2,3,5}: a majority of each).
func TestRule(t *testing.T) {
	if c := Count(3); !c.Met(0b00111) || c.Met(0b00011) || c.IsJoint() || c.Need() != 3 {
		t.Errorf("Count(3) decides wrongly")
	}
	a, b := uint64(0b011111), uint64(0b101111)
	j := Joint(a, 3, b, 3)
	for _, tc := range []struct {
		yes  uint64
		want bool
	}{
		{0b000111, true},  // {0,1,2}: three of each
		{0b010011, false}, // {0,1,4}: three of A, two of B
		{0b100011, false}, // {0,1,5}: two of A, three of B
		{0b110011, true},  // {0,1,4,5}
		{0b111000, false}, // {3,4,5}: two of each
	} {
		if got := j.Met(tc.yes); got != tc.want {
			t.Errorf("Met(%06b) = %v, want %v", tc.yes, got, tc.want)
		}
	}
	if !j.IsJoint() || j.Need() != 3 {
		t.Errorf("joint rule: IsJoint %v, Need %d; want true, 3", j.IsJoint(), j.Need())
	}
	if n := Joint(0b000111, 2, 0b111000, 2).Need(); n != 4 {
		t.Errorf("disjoint sets of three: Need %d, want 4", n)
	}
	// Largest: the largest value that nodes meeting the rule all reach.
	vals := []int64{10, 50, 40, 30, 20, 60}
	if v, ok := j.Largest(vals, 0b111111); !ok || v != 30 {
		t.Errorf("Largest = %d, %v; want 30 (nodes 1, 2, 3 reach it: three of each set)", v, ok)
	}
	if _, ok := j.Largest(vals, 0b000011); ok {
		t.Error("Largest of two nodes met the rule")
	}
}
