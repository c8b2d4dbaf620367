// Package layers measures the shape of the root package: its exported
// surface, its files as boxes with one arrow per file whose code uses a name
// declared in another file, and (shape.go) the length of its functions and
// files, the fields of the repository's structs and its reads of the time.
// Its tests hold the surface and the shape to the limits docs/engine.md
// gives, and scripts/layers prints the figures for any checkout.
package layers

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Package is the root package of a module, type-checked.
type Package struct {
	Module string   // the module path
	Files  []string // the non-test files' base names, sorted
	// Uses counts, for each box, the names it uses that another box
	// declares. A box is a non-test file of the root package, or a package
	// of the module (its path below the module, such as "internal/quorum"),
	// one box each.
	Uses map[string]map[string]int
	// Names holds, for each arrow "from -> to", the names used along it.
	Names map[string][]string
	// Calls holds the functions of the root package (as "file:name") that
	// each function uses: calls it, or takes it as a value.
	Calls map[string][]string

	fset  *token.FileSet
	files []*ast.File
	dir   string
}

// Load parses and type-checks the root package in dir, the directory of a
// module whose path is module, and every package of that module it imports.
func Load(dir, module string) (*Package, error) {
	fset := token.NewFileSet()
	ctx := build.Default
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	p := &Package{Module: module, Uses: map[string]map[string]int{}, Names: map[string][]string{}, Calls: map[string][]string{}, fset: fset, dir: dir}
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		p.Files = append(p.Files, name)
	}
	sort.Strings(p.Files)
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	exports, err := exportData(dir)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("layers: no export data for %s", path)
		}
		return os.Open(file)
	})}
	if _, err := conf.Check(module, fset, p.files, info); err != nil {
		return nil, fmt.Errorf("layers: type-check %s: %w", dir, err)
	}
	for _, f := range p.files {
		from := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			fd, isFunc := d.(*ast.FuncDecl)
			caller := ""
			if isFunc {
				caller = from + ":" + funcName(fd)
			}
			ast.Inspect(d, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				obj := info.Uses[id]
				if obj == nil || obj.Pkg() == nil {
					return true
				}
				to := p.box(obj)
				if to == "" || to == from {
					if to == from && caller != "" {
						p.call(caller, obj)
					}
					return true
				}
				if p.Uses[from] == nil {
					p.Uses[from] = map[string]int{}
				}
				p.Uses[from][to]++
				if arrow := from + " -> " + to; !slices.Contains(p.Names[arrow], id.Name) {
					p.Names[arrow] = append(p.Names[arrow], id.Name)
				}
				if caller != "" {
					p.call(caller, obj)
				}
				return true
			})
		}
	}
	return p, p.packageUses(ctx)
}

// exportData returns the files of export data of the packages that the
// package in dir imports, directly or not, as the go command builds them.
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("layers: go list: %w", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	return exports, nil
}

// box returns the box that declares obj: a file of the root package, a
// package of the module, or "" for the standard library and other modules.
func (p *Package) box(obj types.Object) string {
	if _, ok := obj.(*types.PkgName); ok {
		return ""
	}
	path := obj.Pkg().Path()
	if path == p.Module {
		if !obj.Pos().IsValid() {
			return ""
		}
		if obj.Parent() != nil && obj.Parent() != obj.Pkg().Scope() {
			return "" // a local name
		}
		return filepath.Base(p.fset.Position(obj.Pos()).Filename)
	}
	if rel, ok := strings.CutPrefix(path, p.Module+"/"); ok {
		return rel
	}
	return ""
}

// call records that caller uses obj, when obj is a function of the root
// package.
func (p *Package) call(caller string, obj types.Object) {
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg().Path() != p.Module || !fn.Pos().IsValid() {
		return
	}
	callee := filepath.Base(p.fset.Position(fn.Pos()).Filename) + ":" + objName(fn)
	if callee != caller && !slices.Contains(p.Calls[caller], callee) {
		p.Calls[caller] = append(p.Calls[caller], callee)
	}
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

func objName(fn *types.Func) string {
	sig, _ := fn.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return fn.Name()
	}
	t := sig.Recv().Type()
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	switch t := t.(type) {
	case *types.Named:
		return t.Obj().Name() + "." + fn.Name()
	case *types.Interface:
		// A method of an interface type: name it by the type that
		// declares it, which lies in the same file.
		if named := interfaceOf(fn); named != "" {
			return named + "." + fn.Name()
		}
	}
	return fn.Name()
}

func interfaceOf(fn *types.Func) string {
	scope := fn.Pkg().Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if it, ok := tn.Type().Underlying().(*types.Interface); ok {
			for m := range it.ExplicitMethods() {
				if m == fn {
					return name
				}
			}
		}
	}
	return ""
}

// packageUses adds the arrows between the module's packages that the root
// package uses, directly or not: one per import.
func (p *Package) packageUses(ctx build.Context) error {
	seen := map[string]bool{}
	var visit func(rel string) error
	visit = func(rel string) error {
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		bp, err := ctx.ImportDir(filepath.Join(p.dir, rel), 0)
		if err != nil {
			return err
		}
		for _, imp := range bp.Imports {
			to, ok := strings.CutPrefix(imp, p.Module+"/")
			if !ok {
				continue
			}
			if p.Uses[rel] == nil {
				p.Uses[rel] = map[string]int{}
			}
			p.Uses[rel][to]++
			if err := visit(to); err != nil {
				return err
			}
		}
		return nil
	}
	for _, from := range p.Files {
		for to := range p.Uses[from] {
			if !strings.HasSuffix(to, ".go") {
				if err := visit(to); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Boxes returns every box: the root package's files, then the module's
// packages that they use, directly or not.
func (p *Package) Boxes() []string {
	boxes := slices.Clone(p.Files)
	var pkgs []string
	for from, tos := range p.Uses {
		if !strings.HasSuffix(from, ".go") && !slices.Contains(pkgs, from) {
			pkgs = append(pkgs, from)
		}
		for to := range tos {
			if !strings.HasSuffix(to, ".go") && !slices.Contains(pkgs, to) {
				pkgs = append(pkgs, to)
			}
		}
	}
	sort.Strings(pkgs)
	return append(boxes, pkgs...)
}

// Arrows returns the number of arrows: pairs of boxes where the first uses
// a name the second declares.
func (p *Package) Arrows() int {
	n := 0
	for _, tos := range p.Uses {
		n += len(tos)
	}
	return n
}

// Surface returns the exported names of the root package as go doc -all
// lists them: constants, variables, functions, types and the methods of
// types, and with interfaces the methods of exported interfaces; struct
// fields aside.
func (p *Package) Surface(interfaces bool) []string {
	dp, err := doc.NewFromFiles(p.fset, p.files, p.Module)
	if err != nil {
		return nil
	}
	var names []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	funcs := func(fs []*doc.Func, prefix string) {
		for _, f := range fs {
			names = append(names, prefix+f.Name)
		}
	}
	values(dp.Consts)
	values(dp.Vars)
	funcs(dp.Funcs, "")
	for _, t := range dp.Types {
		names = append(names, t.Name)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs, "")
		funcs(t.Methods, t.Name+".")
		for _, spec := range t.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if it, ok := ts.Type.(*ast.InterfaceType); ok && interfaces {
				for _, m := range it.Methods.List {
					for _, id := range m.Names {
						if id.IsExported() {
							names = append(names, t.Name+"."+id.Name)
						}
					}
				}
			}
		}
	}
	return names
}
