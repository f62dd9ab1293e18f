//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

// cacheConfigs are the caches tested. tol bounds the next-token logits of
// a restored sequence against llama.cpp's own; shifted bounds them when
// keys were re-rotated (by kvstore in Go, by llama.cpp in ggml): 1e-4 for
// an F32 cache without flash attention, as the issue asks. Flash attention
// on the CPU computes in f16, so key differences of 1e-6 move its logits
// by up to 1e-3; an F16 cache rounds the re-rotated keys to f16.
var cacheConfigs = []struct {
	name         string
	o            llamacpp.ContextOptions
	tol, shifted float64
}{
	{"f32", llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32}, 1e-4, 1e-4},
	{"f32-flash", llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32, FlashAttn: true}, 1e-4, 1e-2},
	{"f16", llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF16}, 1e-4, 5e-2},
}

// TestSaveLoad: a prefilled sequence saved to the store and loaded into a
// fresh context gives the next-token logits the original context gives.
func TestSaveLoad(t *testing.T) {
	m := model(t, "gocode-hd64.bin")
	prompt := goPrompt("func (b *Buffer) Len() int {\n\treturn len(b.buf) - b.off\n}\n\nfunc (b *Buffer) ")
	next := prompt[len(prompt)-1]
	doc := prompt[:len(prompt)-1]
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			db := openStore(t, t.TempDir())
			src := newContext(t, m, cfg.o)
			if err := src.Decode(0, 0, doc); err != nil {
				t.Fatal(err)
			}
			id, err := llamacpp.Save(context.Background(), db, "ns", src, 0, u32s(doc))
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Decode(0, len(doc), []int32{next}); err != nil {
				t.Fatal(err)
			}
			want := src.Logits()

			dst := newContext(t, m, cfg.o)
			l, err := llamacpp.Load(context.Background(), db, "ns", dst, 0, []store.AssembleItem{{ID: id}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l.Cells != len(doc) || l.Next != len(doc) {
				t.Fatalf("loaded %+v, want %d cells", l, len(doc))
			}
			if lo, hi := dst.PosRange(0); lo != 0 || hi != len(doc)-1 {
				t.Fatalf("positions [%d, %d]", lo, hi)
			}
			if err := dst.Decode(0, l.Next, []int32{next}); err != nil {
				t.Fatal(err)
			}
			d := maxDiff(dst.Logits(), want)
			t.Logf("%s: %d cells, max |logit difference| %.3g", cfg.name, l.Cells, d)
			if d > cfg.tol {
				t.Fatalf("logits differ by %.3g > %g", d, cfg.tol)
			}
		})
	}
}

// TestSaveAtOffset: a sequence whose cells start at another position is
// stored at local positions and loads back at any offset.
func TestSaveAtOffset(t *testing.T) {
	m := model(t, "stories260K.bin")
	o := llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32}
	db := openStore(t, t.TempDir())
	doc := []int32{1, 400, 401, 402, 300, 301, 20, 21}
	a := newContext(t, m, o)
	if err := a.Decode(0, 0, doc); err != nil {
		t.Fatal(err)
	}
	idA, err := llamacpp.Save(context.Background(), db, "ns", a, 0, u32s(doc))
	if err != nil {
		t.Fatal(err)
	}
	b := newContext(t, m, o)
	if err := b.Decode(0, 40, doc); err != nil {
		t.Fatal(err)
	}
	idB, err := llamacpp.Save(context.Background(), db, "ns2", b, 0, u32s(doc))
	if err != nil {
		t.Fatal(err)
	}
	// Loaded at 40, the packet saved at 0 gives what b gives, and so does
	// b's own, saved at 40 and stored at local positions.
	want := func(t *testing.T, ctx *llamacpp.Context) []float32 {
		if err := ctx.Decode(0, 48, []int32{33}); err != nil {
			t.Fatal(err)
		}
		return ctx.Logits()
	}
	ref := want(t, b)
	for _, it := range []struct {
		ns   string
		item store.AssembleItem
	}{{"ns", store.AssembleItem{ID: idA, Offset: 40}}, {"ns2", store.AssembleItem{ID: idB, Offset: 40}}} {
		t.Run(it.ns, func(t *testing.T) {
			c := newContext(t, m, o)
			if _, err := llamacpp.Load(context.Background(), db, it.ns, c, 0, []store.AssembleItem{it.item}, nil); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(want(t, c), ref); d > 1e-4 {
				t.Fatalf("%s: logits differ by %.3g", it.ns, d)
			}
		})
	}
}

// TestAssembleDocuments: three documents prefilled alone, stored,
// assembled behind each other and loaded give the logits llama.cpp's own
// assembly of the same cells gives (each prefilled alone in one sequence,
// moved with seq_add, the move applied by the next decode). KL against a
// full recompute of the concatenation is reported, as examples/rag does.
func TestAssembleDocuments(t *testing.T) {
	m := model(t, "gocode-hd64.bin")
	docs := [][]int32{
		goPrompt("func Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n"),
		[]int32(goPrompt("func Min(a, b int) int {\n\tif a < b {\n\t\treturn a\n\t}\n\treturn b\n}\n"))[1:],
		[]int32(goPrompt("func Abs(x int) int {\n\tif x < 0 {\n\t\treturn -x\n\t}\n\treturn x\n}\n"))[1:],
	}
	query := []int32(goPrompt("\nfunc Clamp(x, lo, hi int) int {\n\treturn "))[1:]
	for _, cfg := range cacheConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			db := openStore(t, t.TempDir())
			var items []store.AssembleItem
			off := 0
			for i, d := range docs {
				c := newContext(t, m, cfg.o)
				if err := c.Decode(0, 0, d); err != nil {
					t.Fatal(err)
				}
				id, err := llamacpp.Save(context.Background(), db, "ns", c, 0, u32s(d))
				if err != nil {
					t.Fatalf("doc %d: %v", i, err)
				}
				items = append(items, store.AssembleItem{ID: id, Offset: int64(off)})
				off += len(d)
			}
			ours := newContext(t, m, cfg.o)
			l, err := llamacpp.Load(context.Background(), db, "ns", ours, 0, items, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ours.Decode(0, l.Next, query); err != nil {
				t.Fatal(err)
			}
			got := ours.Logits()

			// llama.cpp's own: document i prefilled alone in sequence i
			// at 0, moved to its offset with seq_add, its cells shared
			// into sequence 0 with seq_cp; the query's decode applies the
			// pending shifts.
			oo := cfg.o
			oo.Seqs = len(docs)
			own := newContext(t, m, oo)
			for i, d := range docs {
				if err := own.Decode(i, 0, d); err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					if err := own.Shift(i, 0, -1, int(items[i].Offset)); err != nil {
						t.Fatal(err)
					}
					if err := own.Copy(i, 0, -1, -1); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := own.Decode(0, off, query); err != nil {
				t.Fatal(err)
			}
			want := own.Logits()

			full := newContext(t, m, cfg.o)
			var all []int32
			for _, d := range docs {
				all = append(all, d...)
			}
			if err := full.Decode(0, 0, append(all, query...)); err != nil {
				t.Fatal(err)
			}
			d := maxDiff(got, want)
			kl := llama.LogitsKL(full.Logits(), got)
			klOwn := llama.LogitsKL(full.Logits(), want)
			t.Logf("%s: %d cells from 3 packets: max |logit difference| vs llama.cpp's own assembly %.3g; KL(full recompute || assembled) %.4g nats (llama.cpp's own %.4g)",
				cfg.name, l.Cells, d, kl, klOwn)
			if d > cfg.shifted {
				t.Fatalf("logits differ from llama.cpp's own assembly by %.3g > %g", d, cfg.shifted)
			}
		})
	}
}

// TestBadState: a foreign or truncated state is refused, the sequence
// left empty.
func TestBadState(t *testing.T) {
	m := model(t, "stories260K.bin")
	c := newContext(t, m, llamacpp.ContextOptions{Ctx: 128, Cache: llamacpp.CacheF32})
	doc := []int32{1, 300, 301, 302, 303, 304}
	if err := c.Decode(0, 0, doc); err != nil {
		t.Fatal(err)
	}
	st, err := c.AppendState(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign := append([]byte{}, st...)
	foreign[8] = 7 // n_stream
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"truncated", st[:len(st)-100]},
		{"half", st[:len(st)/2]},
		{"foreign", foreign},
		{"not state", []byte("this is not a llama.cpp state at all")},
		{"empty cell", st[:16]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Remove(0, -1, -1)
			if err := c.Decode(0, 0, doc); err != nil { // cells present before the import
				t.Fatal(err)
			}
			err := c.SetState(0, tc.b)
			if !errors.Is(err, llamacpp.ErrState) {
				t.Fatalf("%s: %v, want ErrState", tc.name, err)
			}
			if lo, hi := c.PosRange(0); lo != -1 || hi != -1 {
				t.Fatalf("%s: sequence holds positions [%d, %d] after a failed import", tc.name, lo, hi)
			}
		})
	}
	if err := c.SetState(0, st); err != nil {
		t.Fatalf("the good state: %v", err)
	}
	if _, hi := c.PosRange(0); hi != len(doc)-1 {
		t.Fatalf("good state: last position %d", hi)
	}
}

// TestBadInput: packets of another model, a shifted sequence, a missing
// library: clear errors, the sequence left empty, nothing lost in the
// store.
func TestBadInput(t *testing.T) {
	stories, gocode := model(t, "stories260K.bin"), model(t, "gocode-hd64.bin")
	o := llamacpp.ContextOptions{Ctx: 128, Cache: llamacpp.CacheF32}
	db := openStore(t, t.TempDir())
	g := newContext(t, gocode, o)
	doc := goPrompt("var x = 1\n")
	if err := g.Decode(0, 0, doc); err != nil {
		t.Fatal(err)
	}
	id, err := llamacpp.Save(context.Background(), db, "ns", g, 0, u32s(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := newContext(t, stories, o)
	if err := s.Decode(0, 0, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	_, err = llamacpp.Load(context.Background(), db, "ns", s, 0, []store.AssembleItem{{ID: id}}, nil)
	if !errors.Is(err, store.ErrModelMismatch) {
		t.Fatalf("gocode packet into stories: %v, want ErrModelMismatch", err)
	}
	if lo, _ := s.PosRange(0); lo != -1 {
		t.Fatal("sequence not left empty")
	}
	// Nothing lost: the packet still loads for its own model.
	if _, err := llamacpp.Load(context.Background(), db, "ns", g, 0, []store.AssembleItem{{ID: id}}, nil); err != nil {
		t.Fatalf("after the mismatch: %v", err)
	}
	// A cancelled request: the store refuses the Put and the Assemble, the
	// sequence is left empty, the stored packet stays.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := llamacpp.Save(cancelled, db, "ns2", g, 0, u32s(doc)); !errors.Is(err, context.Canceled) {
		t.Fatalf("save with a cancelled context: %v, want context.Canceled", err)
	}
	if n := db.Stats().Packets; n != 1 {
		t.Fatalf("after a cancelled save the store holds %d packets, want 1", n)
	}
	if _, err := llamacpp.Load(cancelled, db, "ns", g, 0, []store.AssembleItem{{ID: id}}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with a cancelled context: %v, want context.Canceled", err)
	}
	if lo, _ := g.PosRange(0); lo != -1 {
		t.Fatal("sequence not left empty after a cancelled load")
	}
	if _, err := llamacpp.Load(context.Background(), db, "ns", g, 0, []store.AssembleItem{{ID: id}}, nil); err != nil {
		t.Fatalf("after the cancelled load: %v", err)
	}
	// A cache of another dtype is another spec: not found under it.
	g16 := newContext(t, gocode, llamacpp.ContextOptions{Ctx: 128, Cache: llamacpp.CacheF16})
	if _, err := llamacpp.Load(context.Background(), db, "ns", g16, 0, []store.AssembleItem{{ID: id}}, nil); err == nil {
		t.Fatal("f32 packet loaded into an f16 cache")
	}
	// Shifted and not decoded since: the keys are stale.
	if err := g.Shift(0, 0, -1, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := llamacpp.Save(context.Background(), db, "ns", g, 0, u32s(doc)); !errors.Is(err, llamacpp.ErrState) {
		t.Fatalf("save after a lazy shift: %v, want ErrState", err)
	}
	// Token ids that do not match the cells.
	if err := g.Decode(0, len(doc)+5, []int32{10}); err != nil {
		t.Fatal(err)
	}
	if _, err := llamacpp.Save(context.Background(), db, "ns", g, 0, u32s(doc)); !errors.Is(err, llamacpp.ErrState) && !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("save of cells with a gap: %v", err)
	}
	// Sequences the context does not have: errors, not llama.cpp's abort.
	if err := g.Shift(1, 0, -1, 5); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("shift of sequence 1: %v", err)
	}
	if _, err := llamacpp.Save(context.Background(), db, "ns", g, 3, u32s(doc)); err == nil {
		t.Fatal("save of sequence 3 accepted")
	}
	if _, err := llamacpp.Load(context.Background(), db, "ns", g, -1, []store.AssembleItem{{ID: id}}, nil); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("load into sequence -1: %v", err)
	}
	// A closed context refuses every call.
	closed := newContext(t, gocode, o)
	closed.Close()
	if err := closed.Decode(0, 0, doc); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("decode on a closed context: %v", err)
	}
	if _, err := llamacpp.Load(context.Background(), db, "ns", closed, 0, []store.AssembleItem{{ID: id}}, nil); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("load into a closed context: %v", err)
	}
	// A missing library.
	if _, err := llamacpp.Open(llamacpp.Options{LibDir: t.TempDir()}); !errors.Is(err, llamacpp.ErrNoLibrary) {
		t.Fatalf("empty library dir: %v, want ErrNoLibrary", err)
	}
	t.Setenv(llamacpp.LibEnv, "")
	if _, err := llamacpp.Open(llamacpp.Options{}); !errors.Is(err, llamacpp.ErrNoLibrary) {
		t.Fatalf("no library dir: %v, want ErrNoLibrary", err)
	}
}
