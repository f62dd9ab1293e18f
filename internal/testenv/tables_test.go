package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTablesAreSlices fails for a Test function of the module that ranges
// over a map literal it declares: such a table runs its cases in a random
// order, so that the case a Fatal stops at changes from run to run. A table
// is a slice of cases with a name, each run in t.Run.
func TestTablesAreSlices(t *testing.T) {
	root, ok := ModuleRoot()
	if !ok {
		t.Fatal("no go.mod above the working directory")
	}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, pos := range mapTables(f) {
			p := fset.Position(pos)
			if rel, err := filepath.Rel(root, p.Filename); err == nil {
				p.Filename = rel
			}
			t.Errorf("%v: a Test function ranges over a map literal; make the table a slice of named cases, each in t.Run", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no _test.go files under %s", root)
	}
}

// TestMapTables checks the check on a file of each kind of range it tells
// apart.
func TestMapTables(t *testing.T) {
	const src = `package p

func TestDefine(t *testing.T) {
	tests := map[string]int{"a": 1}
	for name, n := range tests { // flagged
		_, _ = name, n
	}
}

func TestVar(t *testing.T) {
	var cases = map[string]int{"a": 1}
	cases["b"] = 2
	t.Run("x", func(t *testing.T) {
		for name := range cases { // flagged: a table with one more case
			_ = name
		}
	})
	for range map[int]bool{1: true} { // flagged
	}
}

func TestSlice(t *testing.T) {
	tests := []struct{ name string }{{"a"}}
	for _, tc := range tests {
		_ = tc
	}
	got := make(map[string]int)
	for k := range got { // a map the test built, not a table
		_ = k
	}
	live := map[int]bool{}
	for k := range live { // empty: a map the test fills
		_ = k
	}
	index := map[string]int{"a": 0}
	for i := range 3 {
		index[fmt.Sprint(i)] = i
	}
	for k := range index { // stored into from a loop: a model, not a table
		_ = k
	}
	seen := map[string]int{"a": 1}
	seen = collect()
	for k := range seen { // reassigned: no longer the literal
		_ = k
	}
}

func helper(m map[string]int) {
	tests := map[string]int{"a": 1}
	for k := range tests { // not in a Test function
		_ = k
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p_test.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, pos := range mapTables(f) {
		got = append(got, fset.Position(pos).Line)
	}
	want := []int{5, 14, 18}
	if len(got) != len(want) {
		t.Fatalf("flagged lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("flagged lines %v, want %v", got, want)
		}
	}
}

// mapTables returns the positions of the range statements in f's Test
// functions that range over a table written as a map literal: a non-empty
// map literal in the range clause, or one assigned (last, in source order)
// to a variable of the same function. A map the function stores into from a
// loop (m[k] = v in a loop the literal is not in) is one the test builds,
// not a table.
func mapTables(f *ast.File) []token.Pos {
	var out []token.Pos
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
			continue
		}
		literal := make(map[string]int) // variable name -> loop depth of its table literal, -1 for none
		built := make(map[string]bool)  // variable name -> stored into from a deeper loop
		var ranges []*ast.RangeStmt
		var stack []ast.Node
		depth := 0 // loops around the node
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if n == nil {
				if isLoop(stack[len(stack)-1]) {
					depth--
				}
				stack = stack[:len(stack)-1]
				return true
			}
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					switch l := l.(type) {
					case *ast.Ident:
						literal[l.Name] = -1
						if len(n.Lhs) == len(n.Rhs) && isMapTable(n.Rhs[i]) {
							literal[l.Name] = depth
							built[l.Name] = false
						}
					case *ast.IndexExpr:
						if id, ok := l.X.(*ast.Ident); ok {
							if d, ok := literal[id.Name]; ok && d >= 0 && depth > d {
								built[id.Name] = true
							}
						}
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					literal[id.Name] = -1
					if i < len(n.Values) && isMapTable(n.Values[i]) {
						literal[id.Name] = depth
						built[id.Name] = false
					}
				}
			case *ast.RangeStmt:
				if isMapTable(n.X) {
					out = append(out, n.For)
				} else if id, ok := n.X.(*ast.Ident); ok {
					if d, ok := literal[id.Name]; ok && d >= 0 {
						ranges = append(ranges, n)
					}
				}
			}
			stack = append(stack, n)
			if isLoop(n) {
				depth++
			}
			return true
		})
		for _, r := range ranges {
			if !built[r.X.(*ast.Ident).Name] {
				out = append(out, r.For)
			}
		}
	}
	slices.Sort(out)
	return out
}

// isLoop reports whether n is a for or range statement.
func isLoop(n ast.Node) bool {
	switch n.(type) {
	case *ast.ForStmt, *ast.RangeStmt:
		return true
	}
	return false
}

// isMapTable reports whether e is a composite literal of a map type written
// out (map[K]V{...}) with at least one element.
func isMapTable(e ast.Expr) bool {
	c, ok := e.(*ast.CompositeLit)
	if !ok || len(c.Elts) == 0 {
		return false
	}
	_, ok = c.Type.(*ast.MapType)
	return ok
}
