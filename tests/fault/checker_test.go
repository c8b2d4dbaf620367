package fault

import (
	"slices"
	"testing"
)

// TestConflicts checks the checker on made-up records: readers may overlap
// readers, never a writer, and tokens are ordered between conflicting
// holds that follow each other.
func TestConflicts(t *testing.T) {
	w := func(tok, from, to int64) op { return op{Token: tok, Obtained: from, End: to} }
	r := func(tok, from, to int64) op { return op{Token: tok, Obtained: from, End: to, Read: true} }
	for _, tc := range []struct {
		name                         string
		ops                          []op
		overlaps, shared, inversions int
	}{
		{"readers share", []op{r(1, 0, 10), r(2, 5, 15), r(3, 6, 7)}, 0, 3, 0},
		{"writer after readers", []op{r(1, 0, 10), r(2, 5, 15), w(3, 20, 30)}, 0, 1, 0},
		{"reader overlaps a writer", []op{w(1, 0, 10), r(2, 5, 15)}, 1, 0, 0},
		{"writers overlap", []op{w(1, 0, 10), w(2, 5, 15)}, 1, 0, 0},
		{"a read after a write with a lower token", []op{w(5, 0, 10), r(4, 11, 15)}, 0, 0, 1},
		{"a write after a read with an equal token", []op{r(5, 0, 10), w(5, 11, 15)}, 0, 0, 1},
		{"reads are not ordered", []op{r(5, 0, 10), r(4, 11, 15)}, 0, 0, 0},
		{"in order", []op{w(1, 0, 10), r(2, 11, 15), r(3, 12, 16), w(4, 20, 30)}, 0, 1, 0},
	} {
		o, s, i := conflicts(tc.ops, true)
		if o != tc.overlaps || s != tc.shared || i != tc.inversions {
			t.Errorf("%s: overlaps %d, shared %d, inversions %d; want %d, %d, %d", tc.name, o, s, i, tc.overlaps, tc.shared, tc.inversions)
		}
	}
}

// TestMultiOrder checks that the multi-name workload passes Client.All the
// same names in opposite orders at once: at each iteration, two workers
// (of the three the multi scenarios run) give lockName and multiNames[0]
// in opposite orders, and both two- and three-name obtains occur.
func TestMultiOrder(t *testing.T) {
	sizes := map[int]bool{}
	for n := 1; n <= 8; n++ {
		before := map[bool]bool{} // lockName before multiNames[0]?
		for worker := range 3 {
			names := multiOrder(worker, n)
			sizes[len(names)] = true
			before[slices.Index(names, lockName) < slices.Index(names, multiNames[0])] = true
		}
		if len(before) != 2 {
			t.Errorf("iteration %d: every worker gives %s and %s in the same order", n, lockName, multiNames[0])
		}
	}
	if !sizes[2] || !sizes[3] {
		t.Errorf("obtain sizes %v, want both 2 and 3", sizes)
	}
}
