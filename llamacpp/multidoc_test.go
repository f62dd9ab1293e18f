//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

// TestMultiDocNeedle: lab/quality's multi-document needles (four
// requests of four short documents of held-out Go, the needle's document
// at each rank once) read through llama.cpp, each document prefilled
// alone by llama.cpp, saved as a packet, and the request assembled and
// loaded with Load (F32 cache), give the value's per-byte top-1 and
// log-prob of the lab's packets within 0.02, and recall it (top-1 per
// byte >= 0.25, chance 1/26) as llama.cpp's own full recompute does. The
// same holds for packets adapted with a hidden text header, each document
// prefilled after it by llama.cpp (SaveAdapter).
func TestMultiDocNeedle(t *testing.T) {
	multiDocNeedle(t, quality.MultiDocSpec{Requests: 4, DocsMin: 4, DocsMax: 4, DocMin: 60, DocMax: 90, Seed: 1}, 0.25)
}

// TestMultiDocNeedleLong is TestMultiDocNeedle on requests of
// docs/quality.md's size (4-8 documents of 150-400 bytes, up to 2,048
// tokens), 10 of them; KVSTORE_LONG=1 runs it.
func TestMultiDocNeedleLong(t *testing.T) {
	testenv.LongRun(t, "multi-document needles of 2,048 tokens through llama.cpp")
	multiDocNeedle(t, quality.MultiDocSpec{Requests: 10, DocsMin: 4, DocsMax: 8, DocMin: 150, DocMax: 400, Seed: 1}, 0.1)
}

func multiDocNeedle(t *testing.T, spec quality.MultiDocSpec, floor float64) {
	const name = "gocode-2k.bin"
	lm, err := llama.Load(testenv.ModelFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	m := model(t, name)
	testenv.GoToolchain(t)
	root, err := quality.GoSrcDir("")
	if err != nil {
		t.Fatal(err)
	}
	files, err := quality.HeldOutGoFiles(root, 2*spec.DocMax)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := quality.MultiDocRequests(files, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The adapted packets: a hidden header of a few lines of Go
	// (adapter.InitText), each document prefilled after it by llama.cpp.
	text := []int{}
	for _, c := range []byte(multiDocHeader) {
		text = append(text, int(c))
	}
	hdr, err := adapter.InitText(lm, text, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := quality.RunMultiDoc(quality.MultiDocConfig{Model: lm, Requests: reqs,
		Adapters: []quality.MultiDocAdapter{{Name: "text", Adapter: hdr}}})
	if err != nil {
		t.Fatal(err)
	}
	lab := map[string]*quality.MultiDocRow{}
	for i := range rows {
		lab[rows[i].Method] = &rows[i]
	}
	var ours, full, adapted [2]float64 // top-1, log-prob means
	for i, r := range reqs {
		p := multiDocPackets(t, m, r, nil)
		a := multiDocPackets(t, m, r, hdr)
		f := multiDocFull(t, m, r)
		lp, lf, la := lab[quality.MultiPackets].Scores[i], lab[quality.MultiFull].Scores[i], lab["adapter text"].Scores[i]
		t.Logf("request %d (%d documents, needle in %d): packets top-1 %.3f (lab %.3f), log-prob %.3f (lab %.3f); adapted %.3f (lab %.3f), %.3f (lab %.3f); full top-1 %.3f (lab %.3f)",
			i, len(r.Docs), r.Needle+1, p.Top1, lp.Top1, p.LogProb, lp.LogProb, a.Top1, la.Top1, a.LogProb, la.LogProb, f.Top1, lf.Top1)
		for _, x := range []struct {
			sum *[2]float64
			sc  quality.NeedleScore
		}{{&ours, p}, {&full, f}, {&adapted, a}} {
			x.sum[0] += x.sc.Top1 / float64(len(reqs))
			x.sum[1] += x.sc.LogProb / float64(len(reqs))
		}
	}
	labA := lab["adapter text"]
	t.Logf("llama.cpp adapted packets: top-1 %.3f, log-prob %.3f; lab %.3f, %.3f", adapted[0], adapted[1], labA.Top1(), labA.LogProb())
	if math.Abs(adapted[0]-labA.Top1()) > 0.02 || math.Abs(adapted[1]-labA.LogProb()) > 0.02 {
		t.Errorf("adapted packets through llama.cpp: top-1 %.3f, log-prob %.3f; the lab's %.3f, %.3f: want within 0.02", adapted[0], adapted[1], labA.Top1(), labA.LogProb())
	}
	labP, labF := lab[quality.MultiPackets], lab[quality.MultiFull]
	t.Logf("llama.cpp packets: top-1 %.3f, log-prob %.3f; lab %.3f, %.3f; llama.cpp full recompute %.3f, %.3f; lab %.3f, %.3f",
		ours[0], ours[1], labP.Top1(), labP.LogProb(), full[0], full[1], labF.Top1(), labF.LogProb())
	if math.Abs(ours[0]-labP.Top1()) > 0.02 || math.Abs(ours[1]-labP.LogProb()) > 0.02 {
		t.Errorf("packets through llama.cpp: top-1 %.3f, log-prob %.3f; the lab's %.3f, %.3f: want within 0.02", ours[0], ours[1], labP.Top1(), labP.LogProb())
	}
	if math.Abs(full[0]-labF.Top1()) > 0.02 || math.Abs(full[1]-labF.LogProb()) > 0.02 {
		t.Errorf("full recompute through llama.cpp: top-1 %.3f, log-prob %.3f; the lab's %.3f, %.3f: want within 0.02", full[0], full[1], labF.Top1(), labF.LogProb())
	}
	if !(ours[0] >= floor && full[0] >= floor) {
		t.Errorf("top-1 per byte: packets %.3f, full recompute %.3f: want >= %v (chance %.3f)", ours[0], full[0], floor, quality.Chance)
	}
}

// multiDocOptions is an F32 context for r, its cells rounded up to 256.
func multiDocOptions(r *quality.MultiDocRequest) llamacpp.ContextOptions {
	return llamacpp.ContextOptions{Ctx: (r.Len() + 255) / 256 * 256, Cache: llamacpp.CacheF32}
}

// multiDocHeader is the adapted packets' hidden header: lines of Go
// written for the test (docs/quality.md measures a cut of GOROOT's).
const multiDocHeader = "\t\tif err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t}\n\treturn out, nil\n}\n\n"

// multiDocPackets prefills BOS and each of r's documents alone from
// position 0 with llama.cpp (the documents after a's hidden header when a
// is not nil), saves each as a packet, loads them assembled into a fresh
// context and decodes r's continuation over them.
func multiDocPackets(t *testing.T, m *llamacpp.Model, r *quality.MultiDocRequest, a *adapter.Adapter) quality.NeedleScore {
	t.Helper()
	db := openStore(t, t.TempDir())
	var emb *llamacpp.Embeddings
	if a != nil {
		spec, err := m.Spec(llamacpp.CacheF32)
		if err != nil {
			t.Fatal(err)
		}
		if err := adapter.Put(db, spec.Fingerprint(), a.ID(), a); err != nil {
			t.Fatal(err)
		}
		if emb, err = m.TokenEmbeddings(); err != nil {
			t.Fatal(err)
		}
	}
	var items []store.AssembleItem
	off := 0
	for i, d := range slices.Concat([][]int{{1}}, r.Docs) {
		toks := int32s(d)
		func() {
			c, err := m.NewContext(multiDocOptions(r))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var id format.PacketID
			if a != nil && i > 0 {
				id, err = llamacpp.SaveAdapter(context.Background(), db, "ns", c, 0, u32s(toks), emb, a, a.ID())
			} else {
				if err := c.Decode(0, 0, toks); err != nil {
					t.Fatal(err)
				}
				id, err = llamacpp.Save(context.Background(), db, "ns", c, 0, u32s(toks))
			}
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, store.AssembleItem{ID: id, Offset: int64(off)})
		}()
		off += len(d)
	}
	c, err := m.NewContext(multiDocOptions(r))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := llamacpp.Load(context.Background(), db, "ns", c, 0, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Next != off {
		t.Fatalf("loaded up to position %d, want %d", l.Next, off)
	}
	return quality.ScoreValue(r, continuation(t, c, r, off))
}

// multiDocFull decodes r's context then its continuation in one sequence.
func multiDocFull(t *testing.T, m *llamacpp.Model, r *quality.MultiDocRequest) quality.NeedleScore {
	t.Helper()
	c, err := m.NewContext(multiDocOptions(r))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := r.Context()
	if err := c.Decode(0, 0, int32s(ctx)); err != nil {
		t.Fatal(err)
	}
	return quality.ScoreValue(r, continuation(t, c, r, len(ctx)))
}

// continuation decodes r's continuation one token at a time from
// position pos and returns the logits after each.
func continuation(t *testing.T, c *llamacpp.Context, r *quality.MultiDocRequest, pos int) [][]float32 {
	t.Helper()
	var out [][]float32
	for i, tok := range r.Continuation() {
		if err := c.Decode(0, pos+i, []int32{int32(tok)}); err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(c.Logits()))
	}
	return out
}

func int32s(x []int) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}
