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

// docTestName is a test as the docs write it, in code font: `TestX`,
// `TestX/sub`, or `TestX*` (every test whose name begins so).
var docTestName = regexp.MustCompile("`((?:Test|Fuzz)[A-Z]\\w*)(\\*)?")

// goTestFunc is the declaration of a test function.
var goTestFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)

// The evidence of docs/safety.md (the features × faults matrix, and the
// arguments before it) names only tests that exist: every test it
// writes in code font is declared in some _test.go file of the
// repository (a name ending in * matches any test that begins with it).
// A renamed or removed test leaves a cell without evidence, which this
// test reports.
func TestSafetyDocNamesOnlyTestsThatExist(t *testing.T) {
	var declared []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range goTestFunc.FindAllStringSubmatch(string(b), -1) {
			declared = append(declared, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("docs/safety.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range docTestName.FindAllStringSubmatch(line, -1) {
			name, prefix := m[1], m[2] == "*"
			found := false
			for _, d := range declared {
				if d == name || prefix && strings.HasPrefix(d, name) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("docs/safety.md:%d names %s, which no _test.go file declares", i+1, m[0])
			}
		}
	}
}

// No document keeps a merge's conflict markers (a merge once committed
// docs/safety.md with them).
func TestDocsHaveNoConflictMarkers(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "README.md", "CHANGELOG.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") || line == "=======" {
				t.Errorf("%s:%d: a merge's conflict marker: %q", doc, i+1, line)
			}
		}
	}
}
