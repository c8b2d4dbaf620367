package main

import (
	"strings"
	"testing"
)

// TestCatchesLinuxOnlyCode type-checks a module that compiles on Linux
// alone (syscall.Kill in its code, SysProcAttr.Pdeathsig in its test): it
// must pass for linux/amd64 and name both errors for windows/amd64, and the
// test file's for darwin/arm64.
func TestCatchesLinuxOnlyCode(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{"linux/amd64", nil},
		{"linux/arm64", nil},
		{"windows/amd64", []string{"kill.go", "Kill", "kill_test.go", "Pdeathsig"}},
		{"darwin/arm64", []string{"kill_test.go", "Pdeathsig"}},
	} {
		errs, err := check([]string{"testdata/linuxonly"}, tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		all := strings.Join(errs, "\n")
		if len(tc.want) == 0 && len(errs) > 0 {
			t.Errorf("%s: unexpected errors:\n%s", tc.target, all)
		}
		if len(tc.want) > 0 && len(errs) == 0 {
			t.Errorf("%s: no error, want one naming %v", tc.target, tc.want)
		}
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: errors do not name %q:\n%s", tc.target, w, all)
			}
		}
	}
}

func TestTargetFlag(t *testing.T) {
	var ts targets
	for _, bad := range []string{"windows", "/amd64", "windows/", "a/b/c"} {
		if err := ts.Set(bad); err == nil {
			t.Errorf("target %q accepted", bad)
		}
	}
	if err := ts.Set("windows/amd64"); err != nil || ts.String() != "windows/amd64" {
		t.Errorf("windows/amd64: %v, %q", err, ts.String())
	}
}

// TestChecksEveryModuleOfTheWorkspace loads a portable module beside the
// Linux-only one: the errors of the second are found, and none is
// reported in the first.
func TestChecksEveryModuleOfTheWorkspace(t *testing.T) {
	errs, err := check([]string{"testdata/portable", "testdata/linuxonly"}, "windows/amd64")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(errs, "\n")
	for _, w := range []string{"kill.go", "Kill", "kill_test.go", "Pdeathsig"} {
		if !strings.Contains(all, w) {
			t.Errorf("errors do not name %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "portable") {
		t.Errorf("an error in the portable module:\n%s", all)
	}
}
