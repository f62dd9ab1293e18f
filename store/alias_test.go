package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestNoInternalAliases parses the store's non-test files and fails on an
// exported type alias of a type from an internal package (type X =
// maint.Y): go doc shows no fields or methods for it, and a caller cannot
// read its documentation. The store's public types are defined here and
// converted at the boundary (convert.go); aliases of public packages'
// types (format.KVLayout) are fine.
func TestNoInternalAliases(t *testing.T) {
	names, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, e := range names {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		internal := internalImports(t, f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if !ts.Assign.IsValid() || !ts.Name.IsExported() {
					continue
				}
				if pkg, ok := namesInternal(ts.Type, internal); ok {
					t.Errorf("%s: type %s is an alias of a type of internal package %s: define it in package store",
						fset.Position(ts.Pos()), ts.Name.Name, pkg)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no store source file found")
	}
}

// internalImports maps the names f imports internal packages under to
// their paths.
func internalImports(t *testing.T, f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains("/"+path+"/", "/internal/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = path
	}
	return out
}

// namesInternal reports whether type expression x mentions a type of one
// of the internal packages (pointers, slices, maps and generic arguments
// included), and which.
func namesInternal(x ast.Expr, internal map[string]string) (pkg string, found bool) {
	ast.Inspect(x, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return !found
		}
		if id, ok := sel.X.(*ast.Ident); ok {
			if path, ok := internal[id.Name]; ok {
				pkg, found = path, true
			}
		}
		return false
	})
	return pkg, found
}

// TestNamesInternal: the check sees an internal type under pointers,
// slices, maps and generic arguments, and lets public packages' types by.
func TestNamesInternal(t *testing.T) {
	internal := map[string]string{"maint": "github.com/kvstore/kvstore/store/internal/maint"}
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"maint.CompactOptions", true},
		{"*maint.CompactReport", true},
		{"[]maint.Finding", true},
		{"map[string]maint.Finding", true},
		{"func(maint.Garbage) error", true},
		{"list.List[maint.Garbage]", true},
		{"format.KVLayout", false},
		{"[]format.ContextID", false},
		{"int", false},
	} {
		t.Run(c.src, func(t *testing.T) {
			x, err := parser.ParseExpr(c.src)
			if err != nil {
				t.Fatal(err)
			}
			if _, got := namesInternal(x, internal); got != c.want {
				t.Fatalf("namesInternal(%s) = %v, want %v", c.src, got, c.want)
			}
		})
	}
}
