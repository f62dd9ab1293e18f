package quality

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/store"
)

// SpanSizeRow is the size of one context's span memory as
// store.BuildSpanMemory makes it.
type SpanSizeRow struct {
	Tokens          int
	Spans, Factored int // the memory's spans, and those that keep factors
	Resident        int // resident rows
	Size            store.SpanSize
	// Refused: the store would not build the memory
	// (store.ErrSpanNotSmaller); the other fields but Tokens are zero.
	Refused bool
}

// Ratio is the stored bytes over the raw bf16 rows; NaN when refused.
func (r SpanSizeRow) Ratio() float64 {
	if r.Refused {
		return math.NaN()
	}
	return float64(r.Size.Stored()) / float64(r.Size.RawBF16)
}

// SpanSize prefills tokens (a context at position 0) with m and builds its
// span memory as store.BuildSpanMemory does with each of opts (nil: the
// store's defaults, its size rule) for m's spec in dtype dt, in an
// in-memory store, and measures it (store.SpanMemory.Size): one row per
// options.
func SpanSize(m *llama.Model, tokens []int, dt format.DType, opts ...*store.SpanOptions) ([]SpanSizeRow, error) {
	n := len(tokens)
	res, err := m.Forward(tokens, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	h := make([]float32, n)
	h[0] = float32(math.NaN())
	for t := 1; t < n; t++ {
		h[t] = float32(res.Surprisal[t-1])
	}
	in := &store.SpanInput{Model: m.Spec(dt, "spansize"), Surprisal: h}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	rows := make([]SpanSizeRow, len(opts))
	for i, o := range opts {
		if rows[i], err = spanSize(in, o); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// spanSize builds and measures in's span memory with o.
func spanSize(in *store.SpanInput, o *store.SpanOptions) (SpanSizeRow, error) {
	n := len(in.Surprisal)
	db, err := store.Open("/spansize", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		return SpanSizeRow{}, err
	}
	defer db.Close()
	row := SpanSizeRow{Tokens: n}
	mem, err := db.BuildSpanMemory(in, o)
	switch {
	case errors.Is(err, store.ErrSpanNotSmaller):
		row.Refused = true
		return row, nil
	case err != nil:
		return SpanSizeRow{}, fmt.Errorf("quality: span memory of %d tokens: %w", n, err)
	}
	for _, sp := range mem.Segmentation.Spans {
		if sp.Factored {
			row.Factored++
		}
	}
	row.Spans, row.Resident = len(mem.Segmentation.Spans), len(mem.Resident)
	if row.Size, err = mem.Size(); err != nil {
		return SpanSizeRow{}, err
	}
	return row, nil
}

// GoContext is the first window-1 bytes of a Go file after a GoBOS, as
// tokens: one of gocode-2k's contexts.
func GoContext(path string, window int) ([]int, error) {
	b, err := goBytes(path, window-1)
	if err != nil {
		return nil, err
	}
	toks := make([]int, 1, window)
	toks[0] = GoBOS
	for _, c := range b {
		toks = append(toks, int(c))
	}
	return toks, nil
}

// MedianWorst is the median and the largest of the ratios of the rows
// built (NaN, NaN when none was).
func MedianWorst(rows []SpanSizeRow) (median, worst float64) {
	var r []float64
	for _, x := range rows {
		if !x.Refused {
			r = append(r, x.Ratio())
		}
	}
	if len(r) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(r)
	median = r[len(r)/2]
	if len(r)%2 == 0 {
		median = (r[len(r)/2-1] + r[len(r)/2]) / 2
	}
	return median, r[len(r)-1]
}
