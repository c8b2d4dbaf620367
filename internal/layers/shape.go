package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Shape is what issue #34 holds the code to: the length of the root
// package's functions and files, the fields of every struct of the
// repository, and where the root package reads the time.
type Shape struct {
	// Funcs are the root package's functions and methods, longest first,
	// as "file:Name lines".
	Funcs []Measure
	// Files are the root package's non-test files, longest first.
	Files []Measure
	// Structs are the struct types of every module of the repository
	// (tests and testdata aside), most fields first, as "dir/file:Name".
	Structs []Measure
	// TimeReads are the root package's calls of time.Now, time.Since and
	// time.Until, as "file:Func".
	TimeReads []string
}

// Measure is a named count: lines or fields.
type Measure struct {
	Name string
	N    int
}

// MeasureShape measures the repository whose root module is in dir.
func MeasureShape(dir string) (*Shape, error) {
	s := &Shape{}
	fset := token.NewFileSet()
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inRoot := filepath.Dir(rel) == "."
		if inRoot {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			s.Files = append(s.Files, Measure{rel, strings.Count(string(src), "\n")})
		}
		s.measureFile(fset, f, rel, inRoot)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range [][]Measure{s.Funcs, s.Files, s.Structs} {
		slices.SortStableFunc(m, func(a, b Measure) int { return b.N - a.N })
	}
	return s, nil
}

func (s *Shape) measureFile(fset *token.FileSet, f *ast.File, rel string, inRoot bool) {
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	timeName := ""
	for _, im := range f.Imports {
		if im.Path.Value == `"time"` {
			timeName = "time"
			if im.Name != nil {
				timeName = im.Name.Name
			}
		}
	}
	for _, decl := range f.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok && inRoot {
			s.Funcs = append(s.Funcs, Measure{rel + ":" + funcName(fd), lines(fd)})
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeSpec:
				if st, ok := x.Type.(*ast.StructType); ok {
					s.Structs = append(s.Structs, Measure{rel + ":" + x.Name.Name, fieldCount(st)})
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && inRoot && timeName != "" && id.Name == timeName {
					switch x.Sel.Name {
					case "Now", "Since", "Until":
						where := rel
						if fd, ok := decl.(*ast.FuncDecl); ok {
							where += ":" + funcName(fd)
						}
						s.TimeReads = append(s.TimeReads, where+" time."+x.Sel.Name)
					}
				}
			}
			return true
		})
	}
}

func fieldCount(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(1, len(f.Names))
	}
	return n
}
