// Command crosscheck type-checks Go modules, tests included, for other
// targets (GOOS/GOARCH pairs) than the machine's, from source: it catches
// code that compiles on Linux amd64 alone (a Linux-only system call, a
// field of syscall.SysProcAttr that other systems lack, a file for one
// architecture without its twin) without compiling anything.
//
// go vet for another target did the same and more, but it compiles every
// dependency, the standard library included, for that target to get their
// export data: on a machine with an empty build cache that cost about 800
// CPU-seconds for this repository's modules and three targets, against
// about 80 for all of them per target here. vet's analyzers still run on
// every module for Linux (make test runs go test -vet=all); what this
// gives up is running them on the few files that build only for another
// system.
//
// Usage:
//
//	crosscheck -target goos/goarch [-target goos/goarch ...] moduledir...
//
// The modules given are loaded together, in one workspace (a go.work
// file in a temporary directory that uses them all), so that the standard
// library and the dependencies they share are type-checked once per
// target rather than once per module: for this repository's fifteen
// modules that took 18 CPU-seconds a target, against about 80 module by
// module. In a workspace the go command selects one version of each
// dependency for all of the modules (the highest any of them requires),
// so a module may be checked against a newer release of a dependency
// than its own go.mod selects; its own builds and tests, on Linux, use
// its own.
//
// It prints each error as "target: error" (the error's position names
// the module's file) and exits 1 if there was any, 2 on bad usage.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
)

type targets []string

func (t *targets) String() string { return strings.Join(*t, ",") }

func (t *targets) Set(v string) error {
	goos, goarch, ok := strings.Cut(v, "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return fmt.Errorf("target %q: want goos/goarch, such as windows/amd64", v)
	}
	*t = append(*t, v)
	return nil
}

func main() {
	var ts targets
	flag.Var(&ts, "target", "a goos/goarch pair to type-check for (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: crosscheck -target goos/goarch [-target ...] moduledir...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if len(ts) == 0 || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	failed := false
	for _, t := range ts {
		errs, err := check(flag.Args(), t)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", t, err)
			failed = true
			continue
		}
		for _, e := range errs {
			fmt.Printf("%s: %s\n", t, e)
		}
		failed = failed || len(errs) > 0
	}
	if failed {
		os.Exit(1)
	}
}

// check type-checks every package of the modules in dirs, with their
// tests and their dependencies (the standard library included), for
// target, with cgo off, in one workspace of them all; it returns the
// errors found, each once.
func check(dirs []string, target string) ([]string, error) {
	goos, goarch, _ := strings.Cut(target, "/")
	work, err := os.MkdirTemp("", "crosscheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var patterns []string
	args := []string{"work", "init"}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		args = append(args, abs)
		patterns = append(patterns, abs+"/...")
	}
	ws := exec.Command("go", args...)
	ws.Dir = work
	if out, err := ws.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go work init: %v: %s", err, out)
	}
	cfg := &packages.Config{
		Mode:  packages.LoadAllSyntax,
		Tests: true,
		Dir:   work,
		Env: append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=-mod=readonly",
			"GOWORK="+filepath.Join(work, "go.work")),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	var errs []string
	seen := map[string]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			if s := e.Error(); !seen[s] {
				seen[s] = true
				errs = append(errs, s)
			}
		}
	})
	return errs, nil
}
