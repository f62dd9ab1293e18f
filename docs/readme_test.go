package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

// block is one fenced Go block of a Markdown file.
type block struct {
	line int // the line of its opening fence, from 1
	code string
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) ([]block, error) {
	var out []block
	var cur *block
	for i, line := range strings.Split(md, "\n") {
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "```go":
			cur = &block{line: i + 1}
		case cur != nil && fence == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the go block at line %d is not closed", cur.line)
	}
	return out, nil
}

// readme returns the module root and README.md's text.
func readme(t *testing.T) (root, text string) {
	t.Helper()
	root, ok := testenv.ModuleRoot()
	if !ok {
		t.Fatal("no go.mod above the working directory")
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, string(b)
}

func TestGoBlocks(t *testing.T) {
	md := "text\n```go\npackage main\n```\n```sh\ngo run .\n```\n  ```go\nfunc f() {}\n  ```\n"
	got, err := goBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{{2, "package main\n"}, {8, "func f() {}\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("goBlocks = %v, want %v", got, want)
	}
	if _, err := goBlocks("```go\npackage main\n"); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
}

// TestReadmeGoBlocksBuild writes every Go block of README.md into a module
// of its own that requires this repository (replaced by the working tree)
// and builds them all: each must be a complete program.
func TestReadmeGoBlocksBuild(t *testing.T) {
	gocmd := testenv.GoToolchain(t)
	root, text := readme(t)
	blocks, err := goBlocks(text)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no go blocks")
	}
	mod := t.TempDir()
	gomod := fmt.Sprintf("module example.com/readme\n\ngo 1.26.0\n\n"+
		"require github.com/kvstore/kvstore v0.0.0-00010101000000-000000000000\n\n"+
		"replace github.com/kvstore/kvstore => %s\n", filepath.ToSlash(root))
	write(t, filepath.Join(mod, "go.mod"), gomod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // the dependencies' checksums: no lookup
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mod, "go.sum"), string(sum))
	for _, b := range blocks {
		if !strings.HasPrefix(b.code, "package main\n") {
			t.Fatalf("README.md line %d: a go block must be a complete program, starting with \"package main\"", b.line)
		}
		write(t, filepath.Join(mod, fmt.Sprintf("line%d", b.line), "main.go"), b.code)
	}
	cmd := exec.Command(gocmd, "build", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of README.md's go blocks (directory lineN: the block at README.md line N): %v\n%s", err, out)
	}
}

// TestReadmeInstall runs the install command README.md gives, into a
// temporary GOBIN, and runs the installed binary.
func TestReadmeInstall(t *testing.T) {
	gocmd := testenv.GoToolchain(t)
	root, text := readme(t)
	const install = "go install ./tools/kvstore"
	if !strings.Contains(text, "`"+install+"`") {
		t.Fatalf("README.md no longer says `%s`; test the install command it gives", install)
	}
	bin := t.TempDir()
	cmd := exec.Command(gocmd, "install", "./tools/kvstore")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install, err, out)
	}
	exe := filepath.Join(bin, "kvstore")
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("the installed kvstore version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "kvstore ") {
		t.Fatalf("the installed kvstore version printed %q, want \"kvstore ...\"", out)
	}
}

func write(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
