package kvstore_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

const module = "github.com/kvstore/kvstore"

// zone is one of the module's four parts (doc.go).
type zone int

const (
	engine zone = iota
	lab
	testSupport
	commands
)

func (z zone) String() string {
	return [...]string{"engine", "lab", "test support", "commands"}[z]
}

// engineFloors places every engine package, top floor first: a package may
// import only engine packages on floors below its own. The store's internal
// packages share one floor here; store/floors_test.go orders them.
var engineFloors = []struct {
	floor int
	pkgs  []string
}{
	{0, []string{"llamacpp", "tier", "store/admin", "store/gpusource", "store/promstore"}},
	{1, []string{"adapter"}},
	{2, []string{"store"}},
	{3, []string{"store/internal/..."}},
	{4, []string{"gpu", "codec", "prune", "segment"}},
	{5, []string{"reconstruct", "gpu/internal/cuda", "gpu/kernels"}},
	{6, []string{"internal/rowcopy"}},
	{7, []string{"format/gguf", "format/safetensors"}},
	{8, []string{"format"}},
	{9, []string{"format/fb", "internal/crc32c", "internal/dirsync"}},
}

// zoneOf says where pkg (relative to the module, "" for the root) lives.
func zoneOf(pkg string) (zone, bool) {
	switch {
	case pkg == "" || pkg == "fuzz" || pkg == "docs" || pkg == "examples" || pkg == "tools/kvstore" || pkg == "internal/terminal" ||
		strings.HasPrefix(pkg, "lab/cmd/") || strings.HasPrefix(pkg, "examples/"):
		return commands, true
	case strings.HasPrefix(pkg, "lab/"):
		return lab, true
	case pkg == "internal/testenv" || pkg == "internal/s3test" || pkg == "internal/cputest" || pkg == "internal/testsummary":
		return testSupport, true
	}
	_, ok := floorOf(pkg)
	return engine, ok
}

// floorOf returns pkg's engine floor.
func floorOf(pkg string) (int, bool) {
	for _, f := range engineFloors {
		for _, p := range f.pkgs {
			if p == pkg || (strings.HasSuffix(p, "/...") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "..."))) {
				return f.floor, true
			}
		}
	}
	return 0, false
}

// allowed says whether a package of zone from may import one of zone to.
func allowed(from, to zone) bool {
	switch from {
	case engine:
		return to == engine
	case lab:
		return to != commands
	case testSupport:
		return to == testSupport
	}
	return true
}

// TestFloors lists every package's non-test imports and dependencies with
// go list and fails when one crosses a zone it may not (the engine
// importing the lab, test support or a command; the lab importing a
// command) or an engine package imports one on its own floor or above.
func TestFloors(t *testing.T) {
	goTool := testenv.GoToolchain(t)
	root, ok := testenv.ModuleRoot()
	if !ok {
		t.Fatal("no module root above the working directory")
	}
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		return strings.CutPrefix(p, module+"/")
	}
	zones := map[zone]int{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		parts := strings.SplitN(strings.TrimSpace(line), "|", 3)
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		pkg, _ := rel(parts[0])
		z, ok := zoneOf(pkg)
		if !ok {
			t.Errorf("package %q has no zone or floor: add it to engineFloors or zoneOf (and doc.go)", pkg)
			continue
		}
		zones[z]++
		for _, dep := range strings.Fields(parts[2]) {
			d, in := rel(dep)
			if !in {
				continue
			}
			if dz, ok := zoneOf(d); ok && !allowed(z, dz) {
				t.Errorf("%s (%v) depends on %s (%v)", pkg, z, d, dz)
			}
		}
		if z != engine {
			continue
		}
		floor, _ := floorOf(pkg)
		for _, imp := range strings.Fields(parts[1]) {
			d, in := rel(imp)
			if !in {
				continue
			}
			if df, ok := floorOf(d); ok && df <= floor && !(floor == 3 && df == 3) {
				t.Errorf("%s (floor %d) imports %s (floor %d): only floors below it may be imported", pkg, floor, d, df)
			}
		}
	}
	for _, z := range []zone{engine, lab, testSupport, commands} {
		if zones[z] == 0 {
			t.Errorf("go list named no %v package", z)
		}
	}
}

// TestZoneRules pins the zone rules themselves, so that a change to
// allowed or zoneOf that would let the engine reach the lab fails here.
func TestZoneRules(t *testing.T) {
	cases := []struct {
		pkg  string
		want zone
	}{
		{"store", engine},
		{"store/internal/bloblog", engine},
		{"adapter", engine},
		{"internal/crc32c", engine},
		{"lab/llama", lab},
		{"lab/train", lab},
		{"internal/testenv", testSupport},
		{"lab/cmd/kvbench", commands},
		{"tools/kvstore", commands},
		{"examples/rag", commands},
		{"", commands},
	}
	for _, c := range cases {
		t.Run(c.pkg, func(t *testing.T) {
			if z, ok := zoneOf(c.pkg); !ok || z != c.want {
				t.Errorf("zoneOf(%q) = %v, %v; want %v", c.pkg, z, ok, c.want)
			}
		})
	}
	if _, ok := zoneOf("nowhere"); ok {
		t.Error("an unknown package has a zone")
	}
	if allowed(engine, lab) || allowed(engine, testSupport) || allowed(engine, commands) || allowed(lab, commands) || allowed(testSupport, engine) {
		t.Error("a forbidden crossing is allowed")
	}
}
