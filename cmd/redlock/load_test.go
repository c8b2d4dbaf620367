package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// envBurn makes the test binary a CPU burner (burnCPU) for the duration it
// holds, instead of running the tests.
const envBurn = "REDLOCK_TEST_BURN"

// burnCPU keeps every core busy for the duration d (at most a minute),
// then returns.
func burnCPU(d string) {
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 || dur > time.Minute {
		dur = time.Minute
	}
	end := time.Now().Add(dur)
	done := make(chan struct{})
	for range runtime.NumCPU() {
		go func() {
			for n := 0; ; n++ {
				if n%(1<<20) == 0 && time.Now().After(end) {
					done <- struct{}{}
					return
				}
			}
		}()
	}
	for range runtime.NumCPU() {
		<-done
	}
}

// startBurner starts a child process that keeps every core busy for at
// most d, and kills it (by its pid) when the test ends.
func startBurner(t *testing.T, d time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBurn+"="+d.String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// buildCLI builds the command, as a user would (without the race detector,
// whatever the tests run with), and returns the path of the binary.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "redlock")
	// go test puts its own go first on the PATH.
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
