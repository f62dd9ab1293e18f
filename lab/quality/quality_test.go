package quality

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
)

// tinyHD128 is a CI-sized random model with Llama's 128-dim heads.
var tinyHD128 = llama.Config{Dim: 128, Hidden: 128, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 64, SeqLen: 4096, NormEps: 1e-5,
	RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000}}

func storiesOrSkip(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.Load(testenv.ModelFile(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tinyRandom(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.Random(tinyHD128, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRanks asserts that the error falls with rank and vanishes at the
// head dim (factors of every span at full rank are exact).
func checkRanks(t *testing.T, rows []RankRow, hd int) {
	t.Helper()
	if len(rows) == 0 {
		t.Fatal("no rank rows")
	}
	for i, r := range rows {
		for _, e := range []float64{r.KPre, r.KPost, r.Value} {
			if !(e >= 0 && e <= 1+1e-9) {
				t.Fatalf("rank %d: error %v outside [0, 1]", r.Rank, e)
			}
		}
		if i > 0 {
			p := rows[i-1]
			if r.KPre > p.KPre+1e-6 || r.KPost > p.KPost+1e-6 || r.Value > p.Value+1e-6 {
				t.Fatalf("error grows from rank %d %+v to rank %d %+v", p.Rank, p, r.Rank, r)
			}
		}
		if r.Rank == hd && (r.KPre > 1e-5 || r.Value > 1e-5) {
			t.Fatalf("rank %d = head dim: error %+v, want ~0", r.Rank, r)
		}
	}
	if first := rows[0]; first.KPre <= 1e-3 {
		t.Fatalf("rank %d already exact (%v): the sweep measures nothing", first.Rank, first.KPre)
	}
}

func byMethod(rep *Report, budget float64) map[string]Row {
	out := map[string]Row{}
	for _, r := range rep.Rows {
		if r.Budget == budget {
			out[r.Method] = r
		}
	}
	return out
}

func TestQuality(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func(*testing.T) *llama.Model
		bos   int
		seg   segment.Options
		ranks []int
	}{
		{"stories260K", storiesOrSkip, 1, segment.Options{}, []int{1, 2, 4, 8}},
		{"random-hd128", tinyRandom, 0, segment.Options{MinSpan: 40, MaxSpan: 80}, []int{1, 8, 32, 128}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model(t)
			rep, err := Run(Config{Name: tc.name, Model: m, Context: 160, Continuation: 6, BOS: tc.bos,
				Budgets: []float64{0.05, 0.25}, Ranks: tc.ranks, Segment: tc.seg, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.FullMatchesForward {
				t.Fatal("the decode loop's full attention differs from Forward")
			}
			checkRanks(t, rep.Ranks, m.HeadDim())
			if rep.Factored == 0 || rep.StoredRankK < 1 || rep.StoredRankK > 32 || rep.FactorShare <= 0 {
				t.Fatalf("stored memory: %d factored spans, rank %.1f, share %.2f", rep.Factored, rep.StoredRankK, rep.FactorShare)
			}
			lo, hi := byMethod(rep, 0.05), byMethod(rep, 0.25)
			for _, name := range []string{MethodWindow, MethodTop, MethodSpan, MethodSpanSum} {
				a, b := lo[name], hi[name]
				if math.IsNaN(a.KL) || math.IsNaN(b.KL) || a.KL < 0 || b.KL < 0 {
					t.Fatalf("%s: KL %v at 5%%, %v at 25%%", name, a.KL, b.KL)
				}
				if !b.OverBudget && b.Rows > 0.25+1e-9 {
					t.Fatalf("%s at 25%%: used %.3f of the context", name, b.Rows)
				}
				t.Logf("%s: KL %.4f at 5%%, %.4f at 25%%", name, a.KL, b.KL)
			}
			// On the random model more budget gave lower KL for the
			// baselines and span (zoom only) at every seed tried (1-8); span+sum
			// and stories260K at this size (six steps, KL of several nats from
			// a model that attends sharply to single far tokens) are not
			// monotone on every seed, so they are reported, not asserted.
			if tc.name == "random-hd128" {
				for _, name := range []string{MethodWindow, MethodTop, MethodSpan} {
					if hi[name].KL > lo[name].KL {
						t.Fatalf("%s: KL %.4f at 25%% above %.4f at 5%%", name, hi[name].KL, lo[name].KL)
					}
				}
			}
			var md bytes.Buffer
			if err := rep.Markdown(&md); err != nil || !strings.Contains(md.String(), "| 25% |") {
				t.Fatalf("markdown: %v\n%s", err, md.String())
			}
		})
	}
}

// TestSpanExactAtFullBudget checks the whole span pipeline (build, store,
// read back, route, reconstruct at positions, attend): with exact factors,
// tau 0 and the whole context as budget every span is zoomed in and the
// distributions are full attention's up to float32 rounding.
func TestSpanExactAtFullBudget(t *testing.T) {
	m := tinyRandom(t)
	rep, err := Run(Config{Name: "exact", Model: m, Context: 96, Continuation: 4, Budgets: []float64{1},
		Ranks: []int{1}, Energy: 1, MaxRank: 128, SetTau: true, Tau: 0, Seed: 5,
		Segment: segment.Options{MinSpan: 8, MaxSpan: 16}})
	if err != nil {
		t.Fatal(err)
	}
	rows := byMethod(rep, 1)
	for _, name := range []string{MethodWindow, MethodTop} {
		if rows[name].KL != 0 || rows[name].Top1 != 1 {
			t.Fatalf("%s with the whole context: KL %v, top-1 %v", name, rows[name].KL, rows[name].Top1)
		}
	}
	if r := rows[MethodSpan]; r.KL > 1e-6 || r.Top1 != 1 || math.Abs(r.Rows-1) > 1e-9 {
		t.Fatalf("span memory with every span zoomed: KL %v, top-1 %v, rows %v", r.KL, r.Top1, r.Rows)
	}
}

// TestQualityLong produces the docs/quality.md tables' sizes when asked.
func TestQualityLong(t *testing.T) {
	testenv.LongRun(t, "the full measurement (or go run ./lab/cmd/sekvquality)")
	m := storiesOrSkip(t)
	rep, err := Run(Config{Name: "stories260K", Model: m, Context: 448, Continuation: 64, BOS: 1,
		Budgets: []float64{0.05, 0.10, 0.25}, Ranks: []int{1, 2, 4, 8}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
}

func TestWindowAndTopSurprisal(t *testing.T) {
	if got := windowTokens(10, 6); !equalInts(got, []int{0, 1, 2, 3, 8, 9}) {
		t.Fatalf("window of 6 in 10: %v", got)
	}
	if got := windowTokens(10, 2); !equalInts(got, []int{0, 1}) {
		t.Fatalf("window of 2 in 10: %v", got)
	}
	h := []float32{float32(math.NaN()), 1, 5, 2, 5, 0}
	if got := topSurprisal(h, 3); !equalInts(got, []int{0, 2, 4}) {
		t.Fatalf("top 3 surprisal: %v", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
