//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

// spanMemory prefills text with lab/llama's gocode-hd64 and stores and
// opens its span memory (PCA routers, SeKV's default segmentation).
func spanMemory(t *testing.T, text string) (*llama.Model, *llama.Cache, *store.SpanReader) {
	t.Helper()
	m, err := llama.Load(testenv.ModelFile(t, "gocode-hd64.bin"))
	if err != nil {
		t.Fatal(err)
	}
	toks := ints(goPrompt(text))
	res, err := m.Forward(toks, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float32, len(toks))
	h[0] = float32(math.NaN())
	for i := 1; i < len(toks); i++ {
		h[i] = float32(res.Surprisal[i-1])
	}
	db, err := store.Open("/span", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	spec := m.Spec(format.DTypeF32, "gocode-hd64")
	in := &store.SpanInput{Model: spec, Surprisal: h}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	mem, err := db.BuildSpanMemory(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", mem); err != nil {
		t.Fatal(err)
	}
	r, err := db.OpenSpanMemory(context.Background(), "ns", spec.Fingerprint(), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	return m, res.Cache, r
}

const spanText = "func (b *Buffer) Len() int {\n\treturn len(b.buf) - b.off\n}\n\n// Cap returns the capacity of the buffer's underlying byte slice.\nfunc (b *Buffer) Cap() int {\n\treturn cap(b.buf)\n}\n\n// Available returns how many bytes are unused in the buffer.\nfunc (b *Buffer) Available() int {\n\treturn cap(b.buf) - len(b.buf)\n}\n"

// TestSpanRows: a span memory's resident rows come back exactly, at their
// positions, its other rows as ReconstructSpan gives them; and the same
// rows per (layer, KV head) at label positions (SpanGroupRows) give
// llama.cpp the logits they give at their true positions, since a cell's
// position only masks it.
func TestSpanRows(t *testing.T) {
	lm, cache, r := spanMemory(t, spanText)
	meta := r.Meta()
	n, H, D := meta.Tokens, meta.KVHeads, meta.HeadDim
	resident, recon := make([]bool, n), make([]bool, n)
	for _, t := range meta.Resident {
		resident[t] = true
	}
	// Every resident row, the spans 1 and 3 that are factored, the last
	// row.
	var zoomed []int
	for s, info := range meta.Spans {
		if info.Factored && len(zoomed) < 2 && s%2 == 1 {
			zoomed = append(zoomed, s)
			for t := info.Start; t < info.End; t++ {
				recon[t] = !resident[t]
			}
		}
	}
	recon[n-1] = !resident[n-1]
	if len(zoomed) < 2 {
		t.Fatalf("%d factored spans zoomed of %d spans", len(zoomed), len(meta.Spans))
	}
	rows, err := llamacpp.SpanRows(r, resident, recon)
	if err != nil {
		t.Fatal(err)
	}
	var tokens []int
	for i := range n {
		if resident[i] || recon[i] {
			tokens = append(tokens, i)
		}
	}
	c := len(tokens)
	if rows.Len() != c || int(rows.Positions[c-1]) != n-1 {
		t.Fatalf("%d rows ending at %d, want %d ending at %d", rows.Len(), rows.Positions[c-1], c, n-1)
	}
	kspan, vspan := make([]float32, 0), make([]float32, 0)
	for l := range meta.Layers {
		for h := range H {
			for i, tok := range tokens {
				if int(rows.Positions[i]) != tok {
					t.Fatalf("row %d at %d, want %d", i, rows.Positions[i], tok)
				}
				got := rows.K[l][(h*c+i)*D : (h*c+i+1)*D]
				var want []float32
				if resident[tok] {
					want = cache.Layers[l].K[(h*n+tok)*D : (h*n+tok+1)*D]
				} else {
					sp := slices.IndexFunc(meta.Spans, func(s format.Span) bool { return s.Start <= tok && tok < s.End })
					s := meta.Spans[sp]
					kspan, vspan = slices.Grow(kspan[:0], s.Len()*D)[:s.Len()*D], slices.Grow(vspan[:0], s.Len()*D)[:s.Len()*D]
					if err := r.ReconstructSpan(l, h, sp, 0, kspan, vspan); err != nil {
						t.Fatal(err)
					}
					want = kspan[(tok-s.Start)*D : (tok-s.Start+1)*D]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("layer %d head %d token %d (resident %v): keys differ", l, h, tok, resident[tok])
				}
			}
		}
	}

	sets := make([][]int, meta.Layers*H)
	for g := range sets {
		sets[g] = tokens
	}
	lab, err := llamacpp.SpanGroupRows(r, sets, resident)
	if err != nil {
		t.Fatal(err)
	}
	if lab.Len() != c || int(lab.Positions[0]) != n-c || int(lab.Positions[c-1]) != n-1 {
		t.Fatalf("label positions %v", lab.Positions)
	}
	for l := range lab.K {
		if !slices.Equal(lab.K[l], rows.K[l]) || !slices.Equal(lab.V[l], rows.V[l]) {
			t.Fatalf("layer %d: SpanGroupRows' rows differ from SpanRows'", l)
		}
	}
	em := model(t, "gocode-hd64.bin")
	o := llamacpp.ContextOptions{Ctx: 512, Cache: llamacpp.CacheF32}
	a, b := newContext(t, em, o), newContext(t, em, o)
	next := []int32{'\n'}
	for _, x := range []struct {
		c    *llamacpp.Context
		rows *llamacpp.Rows
	}{{a, rows}, {b, lab}} {
		if err := llamacpp.LoadRows(x.c, 0, x.rows); err != nil {
			t.Fatal(err)
		}
		if err := x.c.Decode(0, n, next); err != nil {
			t.Fatal(err)
		}
	}
	if d := maxDiff(a.Logits(), b.Logits()); d > 1e-5 {
		t.Fatalf("true positions and labels: logits %.3g apart", d)
	}

	// Different rows per group: group g drops its own share of the
	// zoomed rows and holds as many recent rows instead. The lab model
	// attending over exactly those rows gives llama.cpp's logits.
	var per [][]int
	for g := range meta.Layers * H {
		drop := map[int]bool{}
		for i, tok := range tokens {
			if !resident[tok] && i%(g+2) == 0 && len(drop) < 3 {
				drop[tok] = true
			}
		}
		set := slices.DeleteFunc(slices.Clone(tokens), func(tok int) bool { return drop[tok] })
		for tok := n - 1; len(set) < c; tok-- {
			if !slices.Contains(set, tok) && !resident[tok] {
				set = append(set, tok)
			}
		}
		slices.Sort(set)
		per = append(per, set)
	}
	diffRows, err := llamacpp.SpanGroupRows(r, per, resident)
	if err != nil {
		t.Fatal(err)
	}
	if err := llamacpp.LoadRows(b, 0, diffRows); err != nil {
		t.Fatal(err)
	}
	if err := b.Decode(0, n, next); err != nil {
		t.Fatal(err)
	}
	want, err := lm.Step(int(next[0]), int64(n), func(s *llama.StepAttention) error {
		group := lm.Heads / H
		for g := range H {
			keys := append(slices.Clone(diffRows.K[s.Layer][g*c*D:(g+1)*c*D]), s.K[g*D:(g+1)*D]...)
			vals := append(slices.Clone(diffRows.V[s.Layer][g*c*D:(g+1)*c*D]), s.V[g*D:(g+1)*D]...)
			for qh := g * group; qh < (g+1)*group; qh++ {
				llama.Attend(s.Out[qh*D:(qh+1)*D], s.Q[qh*D:(qh+1)*D], keys, vals, nil)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d := maxDiff(b.Logits(), want)
	t.Logf("%d rows per group, %d resident; different rows per group: llama.cpp vs lab/llama max |logit difference| %.3g", c, len(meta.Resident), d)
	if d > 1e-3 {
		t.Fatalf("different rows per group: llama.cpp and lab/llama %.3g apart", d)
	}
	if same := maxDiff(b.Logits(), a.Logits()); same < 1e-4 {
		t.Fatalf("different rows per group give the shared rows' logits (%.3g apart)", same)
	}
}

// TestSpanRowsBad: marks and groups that do not fit the memory are
// refused.
func TestSpanRowsBad(t *testing.T) {
	_, _, r := spanMemory(t, spanText)
	meta := r.Meta()
	n, groups := meta.Tokens, meta.Layers*meta.KVHeads
	res, none := make([]bool, n), make([]bool, n)
	for _, t := range meta.Resident {
		res[t] = true
	}
	notRes := slices.Index(res, false)
	both := slices.Clone(res)
	bothRecon := slices.Clone(res)
	oneRes := make([]bool, n)
	oneRes[notRes] = true
	uneven := make([][]int, groups)
	for g := range uneven {
		uneven[g] = meta.Resident[:1+g%2]
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"short marks", func() error { _, err := llamacpp.SpanRows(r, res[:n-1], none[:n-1]); return err }()},
		{"both", func() error { _, err := llamacpp.SpanRows(r, both, bothRecon); return err }()},
		{"not resident", func() error { _, err := llamacpp.SpanRows(r, oneRes, none); return err }()},
		{"nothing", func() error { _, err := llamacpp.SpanRows(r, none, none); return err }()},
		{"uneven groups", func() error { _, err := llamacpp.SpanGroupRows(r, uneven, res); return err }()},
		{"groups", func() error { _, err := llamacpp.SpanGroupRows(r, uneven[:1], res); return err }()},
	} {
		if !errors.Is(tc.err, llamacpp.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, tc.err)
		}
	}
	rt, err := r.Routing()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := llamacpp.RequestSpans(rt, 0, make([][]float32, 1), 10); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Errorf("RequestSpans with one group's queries: %v", err)
	}
	if _, err := llamacpp.GroupSpans(rt, 0, make([][]float32, 1), 10); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Errorf("GroupSpans with one group's queries: %v", err)
	}
}

// TestRequestSpans: the spans chosen for a request fit the token budget,
// are factored and pass their threshold (for the union: in some group),
// and a budget that holds them all takes every span that passes.
func TestRequestSpans(t *testing.T) {
	_, _, r := spanMemory(t, spanText)
	rt, err := r.Routing()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pos := int64(r.Meta().Tokens)
	q := make([][]float32, len(rt.Routers))
	scores := make([][]float32, len(q))
	for g := range q {
		q[g] = make([]float32, 2*rt.Routers[g].HeadDim)
		for i := range q[g] {
			q[g][i] = float32(rng.NormFloat64()) * 4
		}
		if scores[g], err = rt.Score(g, pos, q[g], nil); err != nil {
			t.Fatal(err)
		}
	}
	passes := func(s int) bool {
		for g := range scores {
			if scores[g][s] > rt.Tau[g] {
				return true
			}
		}
		return false
	}
	var all []int
	total := int64(0)
	for s := range rt.Spans {
		if passes(s) {
			all = append(all, s)
			total += int64(rt.SpanTokens[s])
		}
	}
	if len(all) < 2 {
		t.Fatalf("%d spans of %d pass: the test's queries route nothing", len(all), rt.Spans)
	}
	for _, budget := range []int64{total / 2, total} {
		got, err := llamacpp.RequestSpans(rt, pos, q, budget)
		if err != nil {
			t.Fatal(err)
		}
		used := int64(0)
		for _, s := range got {
			used += int64(rt.SpanTokens[s])
			if !rt.Factored[s] || !passes(s) {
				t.Errorf("budget %d: span %d chosen (factored %v)", budget, s, rt.Factored[s])
			}
		}
		if used > budget || !slices.IsSorted(got) || len(got) == 0 {
			t.Errorf("budget %d: spans %v use %d tokens", budget, got, used)
		}
		if budget == total && !slices.Equal(got, all) {
			t.Errorf("budget for all: %v, want %v", got, all)
		}
		groups, err := llamacpp.GroupSpans(rt, pos, q, budget)
		if err != nil {
			t.Fatal(err)
		}
		for g, sps := range groups {
			used := int64(0)
			for _, s := range sps {
				used += int64(rt.SpanTokens[s])
				if !(scores[g][s] > rt.Tau[g]) {
					t.Errorf("group %d: span %d scores %v, tau %v", g, s, scores[g][s], rt.Tau[g])
				}
			}
			if used > budget {
				t.Errorf("group %d: %d tokens over %d", g, used, budget)
			}
		}
	}
}
