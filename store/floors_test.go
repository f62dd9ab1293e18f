package store

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

// floors are the store's packages, top floor first (doc.go, Packages): a
// package may import only packages on floors below its own. Packages of
// the module outside store/ (format, codec, prune, reconstruct, ...) are
// below every floor here; a store package missing from this table fails
// the test, so a new one gets a floor when it is added.
var floors = map[string]int{
	"store/gpusource":         0,
	"store/promstore":         0,
	"store/admin":             0,
	"store":                   1,
	"store/internal/maint":    2,
	"store/internal/access":   2,
	"store/internal/assemble": 2,
	"store/internal/view":     2,
	"store/internal/events":   2,
	"store/internal/recovery": 2,
	"store/internal/packet":   2,
	"store/internal/artifact": 2,
	"store/internal/opstats":  2,
	"store/internal/spandb":   2,
	"store/internal/spanmem":  3,
	"store/internal/catalog":  4,
	"store/internal/bloblog":  5,
	"store/internal/space":    6,
	"store/internal/gate":     6,
	"store/internal/lock":     6,
	"store/internal/cowfs":    6,
}

const module = "github.com/kvstore/kvstore/"

// TestFloors lists every store package's imports with go list and fails
// when one imports a store package on its own floor or above.
func TestFloors(t *testing.T) {
	goTool := testenv.GoToolchain(t)
	root, ok := testenv.ModuleRoot()
	if !ok {
		t.Fatal("no module root above the working directory")
	}
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./store/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		floor, ok := floors[pkg]
		if !ok {
			t.Errorf("package %s has no floor: add it to floors and to doc.go", pkg)
			continue
		}
		seen++
		for _, imp := range f[1:] {
			dep, inModule := strings.CutPrefix(imp, module)
			if !inModule || !(dep == "store" || strings.HasPrefix(dep, "store/")) {
				continue
			}
			if df, ok := floors[dep]; ok && df <= floor {
				t.Errorf("%s (floor %d) imports %s (floor %d): only floors below it may be imported", pkg, floor, dep, df)
			}
		}
	}
	if seen != len(floors) {
		t.Errorf("go list named %d of the %d packages with floors", seen, len(floors))
	}
}
