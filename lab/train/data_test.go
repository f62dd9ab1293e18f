package train

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree writes files (path -> content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		p = filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// SourceFiles never reads testdata or vendor directories; NotTest leaves
// _test.go files out, nil keeps them; short files are left out.
func TestSourceFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"a.go":                   "package a // long enough\n",
		"a_test.go":              "package a // long enough\n",
		"sub/b.go":               "package b // long enough\n",
		"sub/short.go":           "package b",
		"sub/testdata/c.go":      "package c // long enough\n",
		"vendor/x/d.go":          "package d // long enough\n",
		"sub/vendor/e.go":        "package e // long enough\n",
		"sub/notes.txt":          "not go, long enough to count\n",
		"sub/testdata/f_test.go": "package f // long enough\n",
	})
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, err := filepath.Rel(root, p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	for _, c := range []struct {
		name string
		keep func(string) bool
		want []string
	}{
		{"NotTest", NotTest, []string{"a.go", "sub/b.go"}},
		{"all", nil, []string{"a.go", "a_test.go", "sub/b.go"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := SourceFiles(root, ".go", c.keep, 20)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rel(got), c.want) {
				t.Fatalf("SourceFiles: %q, want %q", rel(got), c.want)
			}
			b, err := LoadByteFiles(root, ".go", c.keep, 20)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Files) != len(c.want) {
				t.Fatalf("LoadByteFiles read %d files, want %d", len(b.Files), len(c.want))
			}
		})
	}
	if _, err := SourceFiles(root, ".go", func(p string) bool { return strings.HasSuffix(p, "_test.go") && NotTest(p) }, 0); err == nil {
		t.Fatal("no file kept: no error")
	}
}
