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
	// Types are the root package's types that have methods, most methods
	// first: issue #51 holds their behaviour, not only their fields.
	Types []TypeShape
	// Untested are the root package's source files without a test file
	// named after them (name_test.go), doc.go aside.
	Untested []string
}

// TypeShape is where a type's behaviour lives: its methods, and the files
// that define them.
type TypeShape struct {
	Name    string
	Methods int
	// Files are the files of its methods, sorted; for Lock, a file that
	// holds only public verbs named after it (Refresh in refresh.go) is
	// not counted: a verb's file holds its path from the handle down.
	Files []string
}

// Measure is a named count: lines or fields.
type Measure struct {
	Name string
	N    int
}

// MeasureShape measures the repository whose root module is in dir.
func MeasureShape(dir string) (*Shape, error) {
	s := &Shape{}
	types := map[string]*TypeShape{}
	tests := map[string]bool{}
	var sources []string
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
		rel, _ := filepath.Rel(root, path)
		if strings.HasSuffix(name, "_test.go") && filepath.Dir(rel) == "." {
			tests[name] = true
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
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
			sources = append(sources, rel)
			measureMethods(f, rel, types)
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
	for _, t := range types {
		slices.Sort(t.Files)
		t.Files = slices.Compact(t.Files)
		s.Types = append(s.Types, *t)
	}
	slices.SortFunc(s.Types, func(a, b TypeShape) int {
		if a.Methods != b.Methods {
			return b.Methods - a.Methods
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, src := range sources {
		if src != "doc.go" && !tests[strings.TrimSuffix(src, ".go")+"_test.go"] {
			s.Untested = append(s.Untested, src)
		}
	}
	slices.Sort(s.Untested)
	return s, nil
}

// measureMethods counts the methods of each type that file rel defines.
func measureMethods(f *ast.File, rel string, types map[string]*TypeShape) {
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			continue
		}
		typ, method, _ := strings.Cut(funcName(fd), ".")
		t := types[typ]
		if t == nil {
			t = &TypeShape{Name: typ}
			types[typ] = t
		}
		t.Methods++
		verbFile := typ == "Lock" && ast.IsExported(method) && rel == strings.ToLower(method)+".go"
		if !verbFile {
			t.Files = append(t.Files, rel)
		}
	}
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
