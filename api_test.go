package pkie

import (
	"encoding/json"
	"fmt"
	"go/ast"
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
	"strings"
	"testing"
)

// embedderPackages are the packages a program embedding pkie's client
// imports: what they export is all an embedder can read, so it must name
// nothing they cannot import and say what each identifier is for.
var embedderPackages = []string{
	"github.com/pkie/pkie/check",
	"github.com/pkie/pkie/pec",
	"github.com/pkie/pkie/pec/cloudbundle",
	"github.com/pkie/pkie/obc",
	"github.com/pkie/pkie/obc/server",
}

// TestEmbedderAPINamesNoInternalType type-checks the embedder packages
// from their compiled export data and walks every exported identifier:
// a function's parameters and results, a type's exported fields and
// methods, an alias's target, a variable's or constant's type. A type from
// an internal package there is one an embedder can neither name nor read
// the documentation of (go doc shows an alias's target by name only).
func TestEmbedderAPINamesNoInternalType(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the embedder packages")
	}
	exports := exportData(t, embedderPackages)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, path := range embedderPackages {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("importing %s: %v", path, err)
		}
		var bad []string
		for _, name := range pkg.Scope().Names() {
			obj := pkg.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			w := &internalWalker{seen: map[types.Type]bool{}}
			where := pkg.Name() + "." + name
			switch o := obj.(type) {
			case *types.TypeName:
				if a, ok := o.Type().(*types.Alias); ok {
					w.walk(where, a.Rhs())
					break
				}
				named, ok := o.Type().(*types.Named)
				if !ok {
					break
				}
				switch u := named.Underlying().(type) {
				case *types.Struct:
					for f := range u.Fields() {
						if f.Exported() {
							w.walk(where+"."+f.Name(), f.Type())
						}
					}
				case *types.Interface:
					for m := range u.Methods() {
						if m.Exported() {
							w.walk(where+"."+m.Name(), m.Type())
						}
					}
				default:
					w.walk(where, u)
				}
				for m := range named.Methods() {
					if m.Exported() {
						w.walk(where+"."+m.Name(), m.Type())
					}
				}
			default:
				w.walk(where, obj.Type())
			}
			bad = append(bad, w.found...)
		}
		for _, b := range bad {
			t.Errorf("%s", b)
		}
	}
}

// internalWalker collects the places a type mentions a named type of an
// internal package. It does not descend into named types of public
// packages: their own exported API is theirs to answer for.
type internalWalker struct {
	seen  map[types.Type]bool
	found []string
}

func (w *internalWalker) walk(where string, t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		if isInternal(t.Obj().Pkg()) {
			w.found = append(w.found, fmt.Sprintf("%s mentions %s, of an internal package", where, t))
			return
		}
		w.walk(where, t.Rhs())
	case *types.Named:
		if isInternal(t.Obj().Pkg()) {
			w.found = append(w.found, fmt.Sprintf("%s mentions %s, of an internal package", where, t))
		}
		for a := range t.TypeArgs().Types() {
			w.walk(where, a)
		}
	case *types.Pointer:
		w.walk(where, t.Elem())
	case *types.Slice:
		w.walk(where, t.Elem())
	case *types.Array:
		w.walk(where, t.Elem())
	case *types.Map:
		w.walk(where, t.Key())
		w.walk(where, t.Elem())
	case *types.Chan:
		w.walk(where, t.Elem())
	case *types.Signature:
		for v := range t.Params().Variables() {
			w.walk(where, v.Type())
		}
		for v := range t.Results().Variables() {
			w.walk(where, v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			w.walk(where+"."+f.Name(), f.Type())
		}
	case *types.Interface:
		for m := range t.Methods() {
			w.walk(where+"."+m.Name(), m.Type())
		}
	}
}

func isInternal(p *types.Package) bool {
	if p == nil {
		return false
	}
	path := p.Path()
	return strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// exportData compiles pkgs and returns the export data file of each
// package they depend on, by import path.
func exportData(t *testing.T, pkgs []string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, pkgs...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		m[p.ImportPath] = p.Export
	}
	return m
}

// TestEmbedderAPIDocumented lists the exported identifiers of the embedder
// packages without a doc comment: functions, types, methods, constants,
// variables, and the exported fields and interface methods of exported
// types. A field is documented by its own comment or by a comment on an
// earlier field of the same struct that names it ("Yes counts …; Young
// …"), as crypto/tls documents fields in groups.
func TestEmbedderAPIDocumented(t *testing.T) {
	for _, path := range embedderPackages {
		dir := filepath.FromSlash(strings.TrimPrefix(path, "github.com/pkie/pkie/"))
		for _, miss := range undocumented(t, dir) {
			t.Errorf("%s: %s has no doc comment", dir, miss)
		}
	}
}

func undocumented(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var miss []string
	for _, p := range pkgs {
		var files []*ast.File
		for _, f := range p.Files {
			files = append(files, f)
		}
		d, err := doc.NewFromFiles(fset, files, "github.com/pkie/pkie/"+filepath.ToSlash(dir))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(d.Doc) == "" {
			miss = append(miss, "package "+d.Name)
		}
		values := func(vs []*doc.Value, owner string) {
			for _, v := range vs {
				if strings.TrimSpace(v.Doc) != "" {
					continue
				}
				for _, spec := range v.Decl.Specs {
					vs := spec.(*ast.ValueSpec)
					for _, n := range vs.Names {
						if n.IsExported() && vs.Doc == nil && vs.Comment == nil {
							miss = append(miss, owner+n.Name)
						}
					}
				}
			}
		}
		funcs := func(fs []*doc.Func, owner string) {
			for _, f := range fs {
				if ast.IsExported(f.Name) && strings.TrimSpace(f.Doc) == "" {
					miss = append(miss, owner+f.Name)
				}
			}
		}
		values(d.Consts, "")
		values(d.Vars, "")
		funcs(d.Funcs, "")
		for _, ty := range d.Types {
			if strings.TrimSpace(ty.Doc) == "" {
				miss = append(miss, "type "+ty.Name)
			}
			values(ty.Consts, "")
			values(ty.Vars, "")
			funcs(ty.Funcs, "")
			funcs(ty.Methods, ty.Name+".")
			for _, spec := range ty.Decl.Specs {
				ts := spec.(*ast.TypeSpec)
				var fields *ast.FieldList
				switch u := ts.Type.(type) {
				case *ast.StructType:
					fields = u.Fields
				case *ast.InterfaceType:
					fields = u.Methods
				}
				if fields == nil {
					continue
				}
				var said []string // the comments of earlier fields
				for _, f := range fields.List {
					text := f.Doc.Text() + f.Comment.Text()
					for _, n := range f.Names {
						if !n.IsExported() {
							continue
						}
						if text == "" && !slices.ContainsFunc(said, func(s string) bool { return mentions(s, n.Name) }) {
							miss = append(miss, ty.Name+"."+n.Name)
						}
					}
					if text != "" {
						said = append(said, text)
					}
				}
			}
		}
	}
	slices.Sort(miss)
	return miss
}

// mentions reports whether comment names the identifier name as a word.
func mentions(comment, name string) bool {
	for _, w := range strings.FieldsFunc(comment, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		if w == name {
			return true
		}
	}
	return false
}
