//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/llamacpp"
)

// subsetRows is rows' rows whose index keep says.
func subsetRows(r *llamacpp.Rows, keep func(i int) bool, kvHeads, headDim int) *llamacpp.Rows {
	n := r.Len()
	out := &llamacpp.Rows{K: make([][]float32, len(r.K)), V: make([][]float32, len(r.V))}
	var idx []int
	for i, p := range r.Positions {
		if keep(i) {
			idx = append(idx, i)
			out.Positions = append(out.Positions, p)
		}
	}
	for l := range r.K {
		for h := range kvHeads {
			for _, i := range idx {
				out.K[l] = append(out.K[l], r.K[l][(h*n+i)*headDim:(h*n+i+1)*headDim]...)
				out.V[l] = append(out.V[l], r.V[l][(h*n+i)*headDim:(h*n+i+1)*headDim]...)
			}
		}
	}
	return out
}

// TestLoadRows: a sequence's rows read back and loaded into a fresh
// context give llama.cpp's own next-token logits (within the tolerance of
// TestSaveLoad: the bytes are the cache's own); and a subset with gaps
// (positions removed in the middle) gives the logits of llama.cpp's own
// sequence with those positions removed (llama_memory_seq_rm), decoding
// on at the context's length.
func TestLoadRows(t *testing.T) {
	m := model(t, "gocode-hd64.bin")
	prompt := goPrompt("func (b *Buffer) Len() int {\n\treturn len(b.buf) - b.off\n}\n\nfunc (b *Buffer) Cap() int {\n\treturn cap(b.buf)\n}\n\nfunc (b *Buffer) ")
	next := prompt[len(prompt)-1]
	doc := prompt[:len(prompt)-1]
	n := len(doc)
	gap := func(i int) bool { return i < 20 || (i >= 40 && i < 60) || i >= n-10 }
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			src := newContext(t, m, cfg.o)
			if err := src.Decode(0, 0, doc); err != nil {
				t.Fatal(err)
			}
			rows, err := llamacpp.ReadRows(src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rows.Len() != n || rows.Positions[0] != 0 || rows.Positions[n-1] != int32(n-1) {
				t.Fatalf("read %d rows at %v", rows.Len(), rows.Positions)
			}
			if err := src.Decode(0, n, []int32{next}); err != nil {
				t.Fatal(err)
			}
			want := src.Logits()
			dst := newContext(t, m, cfg.o)
			if err := llamacpp.LoadRows(dst, 0, rows); err != nil {
				t.Fatal(err)
			}
			if lo, hi := dst.PosRange(0); lo != 0 || hi != n-1 {
				t.Fatalf("positions [%d, %d]", lo, hi)
			}
			if err := dst.Decode(0, n, []int32{next}); err != nil {
				t.Fatal(err)
			}
			d := maxDiff(dst.Logits(), want)
			t.Logf("%s: all %d rows: max |logit difference| %.3g", cfg.name, n, d)
			if d > cfg.tol {
				t.Fatalf("all rows: logits differ by %.3g > %g", d, cfg.tol)
			}

			// Positions [20, 40) and [60, n-10) absent.
			own := newContext(t, m, cfg.o)
			if err := own.Decode(0, 0, doc); err != nil {
				t.Fatal(err)
			}
			own.Remove(0, 20, 40)
			own.Remove(0, 60, n-10)
			if err := own.Decode(0, n, []int32{next}); err != nil {
				t.Fatal(err)
			}
			sub := subsetRows(rows, gap, m.KVHeads, m.HeadDim())
			if err := llamacpp.LoadRows(dst, 0, sub); err != nil {
				t.Fatal(err)
			}
			if err := dst.Decode(0, n, []int32{next}); err != nil {
				t.Fatal(err)
			}
			// Flash attention computes in f16 on the CPU and sees the
			// cells in another order (llama.cpp's own keeps the holes
			// seq_rm left, ours are packed): its bound is TestAssembleDocuments'.
			tol := cfg.tol
			if cfg.o.FlashAttn {
				tol = cfg.shifted
			}
			d = maxDiff(dst.Logits(), own.Logits())
			t.Logf("%s: %d of %d rows: max |logit difference| against llama.cpp's own seq_rm %.3g", cfg.name, sub.Len(), n, d)
			if d > tol {
				t.Fatalf("subset: logits differ by %.3g > %g", d, tol)
			}
			if full := maxDiff(dst.Logits(), want); full < 1e-3 {
				t.Fatalf("the subset's logits are the full context's (%.3g apart): the gaps were not absent", full)
			}
		})
	}
}

// TestLoadRowsTrailingGap: llama.cpp refuses to decode at n after rows
// whose last position is below n-1 (its positions must stay
// consecutive); at the last row's position + 1 it decodes.
func TestLoadRowsTrailingGap(t *testing.T) {
	m := model(t, "gocode-hd64.bin")
	o := llamacpp.ContextOptions{Ctx: 128, Cache: llamacpp.CacheF32}
	doc := goPrompt("var x = f(1, 2, 3)\n")
	c := newContext(t, m, o)
	if err := c.Decode(0, 0, doc); err != nil {
		t.Fatal(err)
	}
	rows, err := llamacpp.ReadRows(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := rows.Len()
	sub := subsetRows(rows, func(i int) bool { return i < n-3 }, m.KVHeads, m.HeadDim())
	if err := llamacpp.LoadRows(c, 0, sub); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(0, n, []int32{10}); !errors.Is(err, llamacpp.ErrLlama) {
		t.Fatalf("decode at %d after rows ending at %d: %v, want ErrLlama", n, n-4, err)
	}
	if err := c.Decode(0, n-3, []int32{10}); err != nil {
		t.Fatalf("decode at %d after rows ending at %d: %v", n-3, n-4, err)
	}
}

// TestLoadRowsBad: rows that do not fit the model or are out of order
// are refused, the sequence left empty.
func TestLoadRowsBad(t *testing.T) {
	m := model(t, "stories260K.bin")
	c := newContext(t, m, llamacpp.ContextOptions{Ctx: 64, Cache: llamacpp.CacheF32})
	doc := []int32{1, 300, 301, 302}
	if err := c.Decode(0, 0, doc); err != nil {
		t.Fatal(err)
	}
	rows, err := llamacpp.ReadRows(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	swapped := *rows
	swapped.Positions = []int32{0, 2, 1, 3}
	short := *rows
	short.K = rows.K[:1]
	many := subsetRows(rows, func(int) bool { return true }, m.KVHeads, m.HeadDim())
	many.Positions = append(many.Positions, 4)
	for _, tc := range []struct {
		name string
		r    *llamacpp.Rows
	}{
		{"unordered", &swapped},
		{"layers", &short},
		{"count", many},
		{"empty", &llamacpp.Rows{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Remove(0, -1, -1)
			if err := c.Decode(0, 0, doc); err != nil { // cells present before the load
				t.Fatal(err)
			}
			if err := llamacpp.LoadRows(c, 0, tc.r); !errors.Is(err, llamacpp.ErrInvalidArgument) {
				t.Fatalf("%v, want ErrInvalidArgument", err)
			}
			if lo, _ := c.PosRange(0); lo != -1 {
				t.Fatal("sequence not left empty")
			}
		})
	}
}
