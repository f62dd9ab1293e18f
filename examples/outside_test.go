// Package examples holds TestOutside: every example builds and vets as a
// program of another module, so a user can copy it out of this one.
package examples

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

const module = "github.com/kvstore/kvstore"

// TestOutside copies each example's non-test files into a module of its
// own that requires kvstore (replaced by this checkout) and runs go build
// and go vet there: an example that imports an internal package, or
// anything of its own test files, does not build.
func TestOutside(t *testing.T) {
	goTool := testenv.GoToolchain(t)
	root, ok := testenv.ModuleRoot()
	if !ok {
		t.Fatal("no module root above the working directory")
	}
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, e := range entries {
		if e.IsDir() {
			examples = append(examples, e.Name())
		}
	}
	for _, want := range []string{"adapterpacket", "llamacpp", "longctx", "rag"} {
		if !slices.Contains(examples, want) {
			t.Fatalf("examples %v lack %s", examples, want)
		}
	}
	dir := t.TempDir()
	writeModule(t, root, dir)
	for _, ex := range examples {
		files := copyExample(t, filepath.Join(root, "examples", ex), filepath.Join(dir, ex))
		if len(files) == 0 {
			t.Fatalf("example %s has no non-test Go file", ex)
		}
		for _, f := range files {
			for _, imp := range imports(t, f) {
				if strings.HasPrefix(imp, module+"/") && strings.Contains(imp+"/", "/internal/") {
					t.Errorf("example %s: %s imports %s", ex, filepath.Base(f), imp)
				}
			}
		}
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module outside (examples %v): %v\n%s", strings.Join(args, " "), examples, err, out)
		}
	}
}

// writeModule writes dir/go.mod, a module that requires kvstore replaced
// by root, and root's go.sum (the dependencies' sums).
func writeModule(t *testing.T, root, dir string) {
	t.Helper()
	mod := "module example.com/outside\n\ngo 1.26.0\n\nrequire " + module + " v0.0.0\n\nreplace " + module + " => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyExample copies the .go files of src that are not tests into dst and
// returns their new paths.
func copyExample(t *testing.T, src, dst string) []string {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// imports lists the import paths of the Go file at path.
func imports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
