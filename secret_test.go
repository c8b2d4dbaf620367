package redlock

import "testing"

func TestValuesAreRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		v := newValue()
		if len(v) != 32 || seen[v] {
			t.Fatalf("value %q: length %d, seen before %v", v, len(v), seen[v])
		}
		seen[v] = true
	}
}
