//go:build (linux || darwin) && (amd64 || arm64)

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/llamacpp"
)

// TestOutsideModule builds this program in a module of its own that
// requires kvstore (replaced by this checkout), as a user's program is
// built, and runs it on both test models, visible and hidden header: the
// adapter Init draws through llama.cpp is the one it draws through
// lab/llama, both packets hold the rows the adapter says, and their keys
// and values agree within 1e-4 of the largest value (the llama.cpp
// package's tests see about 1e-6 on these models in f32). With a
// tolerance of 0 the program fails: its check can.
func TestOutsideModule(t *testing.T) {
	lib := testenv.Env(t, testenv.LibLlama, llamacpp.LibEnv)
	goTool := testenv.GoToolchain(t)
	models := []string{testenv.ModelFile(t, "gocode-hd64.bin"), testenv.ModelFile(t, "stories260K.bin")}
	root, ok := testenv.ModuleRoot()
	if !ok {
		t.Fatal("no module root above the working directory")
	}
	dir := t.TempDir()
	mod := "module example.com/outside\n\ngo 1.26.0\n\nrequire github.com/kvstore/kvstore v0.0.0\n\nreplace github.com/kvstore/kvstore => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ src, dst string }{{filepath.Join(root, "go.sum"), "go.sum"}, {"main.go", "main.go"}} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "adapterpacket")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module outside: %v\n%s", err, out)
	}

	const doc = "func Abs(x int) int {\n\tif x < 0 {\n\t\treturn -x\n\t}\n\treturn x\n}\n"
	for _, tc := range []struct {
		model string
		hide  bool
	}{{models[0], false}, {models[1], true}} {
		t.Run(fmt.Sprintf("%s/hide=%v", filepath.Base(tc.model), tc.hide), func(t *testing.T) {
			args := []string{"-model", tc.model, "-lib", lib, "-doc", doc, "-header", "3", "-trailer", "2", fmt.Sprintf("-hide=%v", tc.hide)}
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			s := string(out)
			t.Log(s)
			header := 3
			if tc.hide {
				header = 0
			}
			rows := fmt.Sprintf("%d rows = %d header + %d document + 2 trailer", header+len(doc)+2, header, len(doc))
			for _, want := range []string{"adapter.Init through llama.cpp gives the same adapter: true",
				"lab/llama packet", "llama.cpp packet", "the two packets agree"} {
				if !strings.Contains(s, want) {
					t.Fatalf("output lacks %q", want)
				}
			}
			if n := strings.Count(s, rows); n != 2 {
				t.Fatalf("%d packets of %q, want 2", n, rows)
			}
			for _, kv := range []string{"K", "V"} {
				m := regexp.MustCompile(kv + ` rows: .* relative (\S+) `).FindStringSubmatch(s)
				if m == nil {
					t.Fatalf("no %s difference in the output", kv)
				}
				rel, err := strconv.ParseFloat(m[1], 64)
				if err != nil || !(rel <= 1e-4) {
					t.Fatalf("%s rows differ by %s relative: %v", kv, m[1], err)
				}
			}
			out, err = exec.Command(bin, append(args, "-tol", "0")...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "disagree") {
				t.Fatalf("with tolerance 0: %v\n%s", err, out)
			}
		})
	}
}
