//go:build !linux

package robust

import "testing"

// The robustness scenarios need Linux network namespaces: they fail, and
// say so, elsewhere.
func TestNeedsLinux(t *testing.T) {
	t.Fatal("the robustness scenarios need Linux network namespaces (and root)")
}
