package quality

import (
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// TestSpanSizeGoCode2k is a small version of docs/quality.md's span memory
// size measurement (lab/cmd/spansize): on three held-out contexts of 1,024
// tokens of gocode-2k with a bf16 spec, the store's defaults build a span
// memory of each, at most its raw bf16 rows with every stored byte
// counted (0.93-0.96 measured; median 0.967, at most 0.980 on 24 contexts
// of 2,048 tokens), where factoring every span the segmentation factors
// (FactorAll) takes more than its rows on at least one of them (1.02-1.14:
// the summaries of every span, factors of spans that do not compress).
func TestSpanSizeGoCode2k(t *testing.T) {
	m, files := longCtxOrSkip(t, 1024)
	over := 0
	for i := range 3 {
		toks, err := GoContext(files[i*len(files)/3], 1024)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := SpanSize(m, toks, format.DTypeBF16, nil, &store.SpanOptions{FactorAll: true})
		if err != nil {
			t.Fatal(err)
		}
		r, all := rows[0], rows[1]
		if r.Refused || r.Size.Stored() > r.Size.RawBF16 || r.Size.Raw != r.Size.RawBF16 {
			t.Errorf("%s: refused %v, stored %d bytes, raw bf16 %d, raw %d", files[i*len(files)/3], r.Refused,
				r.Size.Stored(), r.Size.RawBF16, r.Size.Raw)
		}
		if all.Ratio() > 1 {
			over++
		}
		t.Logf("%s: %d of %d spans factored, %.3f of raw bf16; every span factored: %d of %d, %.3f", files[i*len(files)/3],
			r.Factored, r.Spans, r.Ratio(), all.Factored, all.Spans, all.Ratio())
	}
	if over == 0 {
		t.Error("FactorAll kept every memory within its rows: the test shows nothing")
	}
}
