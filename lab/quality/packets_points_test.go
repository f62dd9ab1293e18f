package quality

import (
	"bytes"
	"strings"
	"testing"
)

// TestPointsMarkdown checks a points report's summaries and table on a
// report built by hand: median and worst per point, rows sorted by median
// bytes, the bound's mark only on points whose worst text is within it.
func TestPointsMarkdown(t *testing.T) {
	r := &PointsReport{Name: "hand", Layers: 1, KVHeads: 1, HeadDim: 2, Context: 8, Continuation: 2, Files: []string{"a", "b", "c"},
		Rows: []PointRow{
			{Setting: "int4", Policy: PolicyNone, Keep: 1, KL: []float64{1e-3, 3e-3, 2e-3}, MaxKL: []float64{1, 2, 3},
				BytesPerToken: []float64{10, 10, 10}, OfBF16: []float64{0.3, 0.3, 0.3}, Kept: []float64{1, 1, 1}},
			{Setting: "int4", Policy: PolicyMass, Keep: 0.9, KL: []float64{5e-3, 2e-2, 1e-3}, MaxKL: []float64{1, 2, 3},
				BytesPerToken: []float64{4, 8, 6}, OfBF16: []float64{0.1, 0.2, 0.15}, Kept: []float64{0.4, 0.8, 0.6}},
		}}
	mass, ok := r.Row("int4", PolicyMass, 0.9)
	if !ok || mass.MedianKL() != 5e-3 || mass.WorstKL() != 2e-2 || mass.MedianBytes() != 6 || mass.WorstBytes() != 8 || mass.WorstOfBF16() != 0.2 {
		t.Fatalf("mass row %v: median KL %v, worst %v, bytes %v / %v", ok, mass.MedianKL(), mass.WorstKL(), mass.MedianBytes(), mass.WorstBytes())
	}
	if _, ok := r.Row("int4", PolicyTOVA, 0.9); ok {
		t.Error("found a point that was not measured")
	}
	var b bytes.Buffer
	if err := r.Markdown(&b, 0.01); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "| int4") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 2 || !strings.Contains(rows[0], "tova-mass") || !strings.Contains(rows[0], "mass 0.9: 60.0% / 80.0%") ||
		strings.HasSuffix(rows[0], "| yes |") || !strings.HasSuffix(rows[1], "| yes |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
