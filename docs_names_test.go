package redlock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docErrorName is an error of the API as the docs write it: `ErrX`,
// `*XError`, `redlock.ErrX`, `fence.ErrX`.
var docErrorName = regexp.MustCompile("`(?:\\*)?(?:(redlock|fence)\\.)?((?:Err[A-Z]\\w*)|(?:[A-Z]\\w*Error))`")

// The docs name only errors that the API has: every error variable or
// error type they write in code font is declared in package redlock or
// package fence (in that package when the docs qualify the name).
// docs/migration.md, which lists the removed ones, is not checked.
func TestDocsNameOnlyErrorsOfTheAPI(t *testing.T) {
	declared := map[string]map[string]bool{"redlock": declaredIn(t, "."), "fence": declaredIn(t, "fence")}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "README.md") {
		if filepath.Base(doc) == "migration.md" {
			continue
		}
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range docErrorName.FindAllStringSubmatch(line, -1) {
				pkg, name := m[1], m[2]
				ok := declared[pkg][name]
				if pkg == "" {
					ok = declared["redlock"][name] || declared["fence"][name]
				}
				if !ok {
					t.Errorf("%s:%d names %s, which neither package redlock nor package fence declares", doc, i+1, m[0])
				}
			}
		}
	}
}

// declaredIn returns the names declared at the top level of the non-test
// Go files in dir.
func declaredIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	declared := map[string]bool{}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declared[n.Name] = true
					}
				case *ast.TypeSpec:
					declared[s.Name.Name] = true
				}
			}
		}
	}
	return declared
}
