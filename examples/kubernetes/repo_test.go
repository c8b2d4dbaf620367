package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// The repository's root and the CLI's module, from this directory.
var (
	repoRoot = filepath.Join("..", "..")
	cliDir   = filepath.Join(repoRoot, "cmd", "redlock")
)

// goCmd runs the go command in dir and returns its output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// TestFlagsAreTheCLIs checks the flags the test knows (redlockFlags)
// against the built CLI's --help of each command.
func TestFlagsAreTheCLIs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	bin := filepath.Join(t.TempDir(), "redlock")
	goCmd(t, cliDir, "build", "-o", bin, ".")
	line := regexp.MustCompile(`^  --([a-z-]+)( \S+)?$`)
	for name, want := range redlockFlags {
		out, err := exec.Command(bin, name, "--help").Output()
		if err != nil {
			t.Fatalf("redlock %s --help: %v", name, err)
		}
		got := map[string]bool{}
		for l := range strings.SplitSeq(string(out), "\n") {
			if m := line.FindStringSubmatch(l); m != nil {
				got[m[1]] = m[2] == ""
			}
		}
		for flag, isBool := range got {
			if w, ok := want[flag]; !ok || w != isBool {
				t.Errorf("redlock %s --%s (boolean %v): redlockFlags has %v, %v", name, flag, isBool, w, ok)
			}
		}
		for flag := range want {
			if _, ok := got[flag]; !ok {
				t.Errorf("redlock %s has no flag --%s, which redlockFlags lists", name, flag)
			}
		}
	}
}

// TestImageContext checks the Dockerfile and the repository's
// .dockerignore: the context holds every file the CLI's build reads (go
// list -deps) and leaves out the rest; the modules are downloaded in a
// layer of their own, before the sources are copied; the image has CA
// certificates and stamps its version.
func TestImageContext(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	inContext := func(file string) bool {
		excluded, err := pm.MatchesOrParentMatches(file)
		if err != nil {
			t.Fatal(err)
		}
		return !excluded
	}
	for _, file := range buildFiles(t) {
		if !inContext(file) {
			t.Errorf(".dockerignore leaves out %s, which the CLI's build reads", file)
		}
	}
	for _, file := range []string{".git", "docs/kubernetes.md", "bench/go.mod", "examples/kubernetes/app.yaml", "cmd/redlock/main_test.go", "driver/rueidis/go.mod", "redlockotel/go.mod"} {
		if inContext(file) {
			t.Errorf(".dockerignore keeps %s, which the build does not read", file)
		}
	}
	checkDockerfile(t, inContext)
}

// buildFiles are the files of the repository that building the CLI
// reads, relative to its root: both modules' go.mod and go.sum, and the
// Go and embedded files of every package of theirs that the CLI imports.
func buildFiles(t *testing.T) []string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum", "cmd/redlock/go.mod", "cmd/redlock/go.sum"}
	out := goCmd(t, cliDir, "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Dir "`+root+`" "`+filepath.Join(root, "cmd", "redlock")+`"}}{{.Dir}}|{{join .GoFiles ","}},{{join .EmbedFiles ","}}{{end}}{{end}}`, ".")
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		dir, names, _ := strings.Cut(line, "|")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		for name := range strings.SplitSeq(names, ",") {
			if name != "" {
				files = append(files, filepath.ToSlash(filepath.Join(rel, name)))
			}
		}
	}
	if len(files) < 20 {
		t.Fatalf("go list found only %v", files)
	}
	return files
}

// checkDockerfile checks the build stage's order and the image's
// contents.
func checkDockerfile(t *testing.T, inContext func(string) bool) {
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	lines := dockerfileLines(string(data))
	index := func(re string) int {
		return slices.IndexFunc(lines, regexp.MustCompile(re).MatchString)
	}
	copyMods, download, copyAll := index(`^COPY go\.mod go\.sum`), index(`^RUN .*go mod download`), index(`^COPY \. \.`)
	if copyMods < 0 || download < copyMods || copyAll < download {
		t.Errorf("Dockerfile: want the modules copied (COPY go.mod go.sum) and downloaded (go mod download) before the sources (COPY . .): lines %d, %d, %d", copyMods, download, copyAll)
	}
	if i := index(`-X main\.version=\$\{?VERSION`); i < 0 || index(`^ARG VERSION`) < 0 {
		t.Error("Dockerfile: the CLI is not stamped with ARG VERSION (-X main.version)")
	}
	if last, ca := index(`^FROM debian`), index(`apt-get install .*ca-certificates`); last < 0 || ca < last {
		t.Error("Dockerfile: the image does not install ca-certificates (rediss:// nodes)")
	}
	for _, l := range lines {
		fields := strings.Fields(l)
		if len(fields) < 3 || fields[0] != "COPY" || strings.HasPrefix(fields[1], "--from") {
			continue
		}
		for _, src := range fields[1 : len(fields)-1] {
			if src != "." && !inContext(src) {
				t.Errorf("Dockerfile copies %s, which .dockerignore leaves out", src)
			}
		}
	}
}
