package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docCode is a name in code font as docs/engine.md's tables write one:
// `name`, `Type.method` or `*Type`.
var docCode = regexp.MustCompile("`\\*?([A-Za-z_]\\w*(?:\\.[A-Za-z_]\\w*)?)`")

// TestEngineDocMatchesTheFiles holds docs/engine.md to the code, file by
// file (issue #51): its table of root files lists every source file of the
// root package and no other, and each name a row writes in code font is
// declared in that row's files (a function, a type, a variable or
// constant, or a method: `Type.method`, or a bare method name). The tables
// of the engine's parts and of a lock's are held the same way: each part is
// a type of its file, and each behaviour a method of that type.
func TestEngineDocMatchesTheFiles(t *testing.T) {
	decls, err := rootDecls("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/engine.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")

	listed := map[string]bool{}
	for _, row := range tableRows(t, lines, "| root file | what it holds |") {
		files := strings.Split(strings.TrimSpace(row[0]), ", ")
		for _, f := range files {
			if _, ok := decls[f]; !ok {
				t.Errorf("docs/engine.md lists %s, which is not a source file of the root package", f)
			}
			listed[f] = true
		}
		for _, m := range docCode.FindAllStringSubmatch(row[1], -1) {
			if !slices.ContainsFunc(files, func(f string) bool { return decls[f][m[1]] }) {
				t.Errorf("docs/engine.md's row of %s names `%s`, which %s does not declare", row[0], m[1], row[0])
			}
		}
	}
	for f := range decls {
		if !listed[f] && f != "doc.go" {
			t.Errorf("docs/engine.md's table of root files does not list %s", f)
		}
	}

	for _, row := range tableRows(t, lines, "| part (file) | its state | its behaviour |") {
		part := regexp.MustCompile("^`(\\w+)` \\(([\\w.]+)(?:, ([\\w.]+))?\\)$").FindStringSubmatch(strings.TrimSpace(row[0]))
		if part == nil {
			t.Errorf("docs/engine.md's table of parts: %q is not `part` (file)", row[0])
			continue
		}
		typ, files := part[1], []string{part[2], part[3]}
		if !slices.ContainsFunc(files, func(f string) bool { return decls[f][typ] }) {
			t.Errorf("docs/engine.md's part `%s` is not a type of %s", typ, part[2])
		}
		for _, m := range docCode.FindAllStringSubmatch(row[2], -1) {
			method := typ + "." + m[1]
			if !slices.ContainsFunc(files, func(f string) bool { return decls[f][method] }) {
				t.Errorf("docs/engine.md's part `%s` does `%s`, which is no method of it in %s", typ, m[1], strings.Join(slices.DeleteFunc(files, func(f string) bool { return f == "" }), ", "))
			}
		}
	}
}

// tableRows returns the cells of the rows of every markdown table whose
// header line is header.
func tableRows(t *testing.T, lines []string, header string) [][]string {
	t.Helper()
	var rows [][]string
	for i, l := range lines {
		if l != header {
			continue
		}
		for _, l := range lines[i+2:] {
			if !strings.HasPrefix(l, "|") {
				break
			}
			cells := strings.Split(strings.Trim(l, "|"), " | ")
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			rows = append(rows, cells)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/engine.md has no table %q, or it has no rows", header)
	}
	return rows
}

// rootDecls returns, for each non-test Go file of the root package in dir,
// the names it declares: its functions, types, variables and constants,
// and its methods both as Type.method and as method.
func rootDecls(dir string) (map[string]map[string]bool, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	decls := map[string]map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		names := map[string]bool{}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
				if d.Recv != nil {
					names[recvName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
		decls[filepath.Base(p)] = names
	}
	return decls, nil
}

// recvName is the name of a method's receiver type.
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
