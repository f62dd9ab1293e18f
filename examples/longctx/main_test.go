package main

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

func checkRun(t *testing.T, r *result, out string, steps, context int, budget float64) {
	t.Helper()
	if len(r.Steps) != steps || r.Spans == 0 || r.Anchors == 0 || r.FactorBytes <= 0 {
		t.Fatalf("%d steps, %d spans, %d anchors, %d factor bytes", len(r.Steps), r.Spans, r.Anchors, r.FactorBytes)
	}
	budgetRows := float64(int(budget * float64(context)))
	for i, s := range r.Steps {
		if !(s.KL >= 0) || math.IsInf(s.KL, 0) {
			t.Fatalf("step %d: KL %v", i, s.KL)
		}
		// Rows on the GPU per (layer, KV head): resident plus zoomed, within
		// the budget (whole spans, shared by a layer's heads: per group on
		// average).
		if r.ResidentRows <= int(budgetRows) && s.Rows > budgetRows+1e-9 {
			t.Fatalf("step %d: %.1f rows per group, budget %v", i, s.Rows, budgetRows)
		}
		if s.Rows < float64(r.ResidentRows) {
			t.Fatalf("step %d: %.1f rows, fewer than the %d resident", i, s.Rows, r.ResidentRows)
		}
	}
	for _, want := range []string{r.Model, "span memory", "mean KL(full || span memory)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunRandom(t *testing.T) {
	var out bytes.Buffer
	r, err := run(&out, config{context: 128, steps: 2, budget: 0.5, random: true, minSpanRandom: 32})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, out.String(), 2, 128, 0.5)
	zoomed := 0
	for _, s := range r.Steps {
		zoomed += s.Zoomed
	}
	if zoomed == 0 {
		t.Fatalf("half the context as budget zoomed no span:\n%s", out.String())
	}
}

func TestRunStories(t *testing.T) {
	dir := filepath.Dir(testenv.ModelFile(t, "stories260K.bin"))
	var out bytes.Buffer
	r, err := run(&out, config{model: "stories", testdata: dir, context: 96, steps: 2, budget: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Model, "stories260K") {
		t.Fatalf("stories260K is present but the run used %s", r.Model)
	}
	checkRun(t, r, out.String(), 2, 96, 0.25)
}

func TestRunGoCode(t *testing.T) {
	dir := filepath.Dir(testenv.ModelFile(t, "gocode-hd64.bin"))
	var out bytes.Buffer
	r, err := run(&out, config{testdata: dir, context: 96, steps: 2, budget: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Model, "gocode-hd64") {
		t.Fatalf("the default run used %s, not gocode-hd64", r.Model)
	}
	checkRun(t, r, out.String(), 2, 96, 0.25)
}

func TestRunUnknownModel(t *testing.T) {
	if _, err := run(io.Discard, config{model: "gpt", context: 96, steps: 2, budget: 0.25}); err == nil {
		t.Fatal("-model gpt ran")
	}
}

// A checkpoint given by path is used; a missing one is an error naming it.
func TestRunModelPath(t *testing.T) {
	p := testenv.ModelFile(t, "stories260K.bin")
	var out bytes.Buffer
	r, err := run(&out, config{model: p, context: 96, steps: 1, budget: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Model, strings.TrimSuffix(filepath.Base(p), ".bin")) {
		t.Fatalf("-model %s ran %s", p, r.Model)
	}
	missing := filepath.Join(t.TempDir(), "none.bin")
	if _, err := run(io.Discard, config{model: missing, context: 96, steps: 1, budget: 0.25}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("-model %s: %v", missing, err)
	}
}

// A named model missing from -testdata falls back to the random model and
// says why.
func TestRunNamedModelMissing(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	r, err := run(&out, config{model: "gocode", testdata: dir, context: 128, steps: 1, budget: 0.5, minSpanRandom: 32})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Model, "random") || !strings.Contains(out.String(), "gocode-hd64.bin not found in "+dir) {
		t.Fatalf("model %s, output:\n%s", r.Model, out.String())
	}
}
