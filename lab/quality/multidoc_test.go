package quality

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// multiDocCI are the requests of the CI tests (here and in llamacpp):
// four requests of four documents of 60-90 bytes of held-out Go, the
// needle's document at each rank once.
var multiDocCI = MultiDocSpec{Requests: 4, DocsMin: 4, DocsMax: 4, DocMin: 60, DocMax: 90, Seed: 1}

// TestMultiDocRetrieval is a small version of docs/quality.md's
// multi-document needles: gocode-2k recalls a value defined in one of four
// documents across the packets as it does over a full recompute (top-1 per
// byte far above chance, 1/26, on both), the packets' distributions differ
// from the full recompute's (KL > 0) and CacheBlend's recompute brings
// them closer.
func TestMultiDocRetrieval(t *testing.T) {
	m, files := longCtxOrSkip(t, 2*multiDocCI.DocMax)
	reqs, err := MultiDocRequests(files, multiDocCI)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.Needle != i || len(r.Docs) != 4 {
			t.Fatalf("request %d: needle in document %d of %d, want %d of 4", i, r.Needle, len(r.Docs), i)
		}
	}
	rows, err := RunMultiDoc(MultiDocConfig{Model: m, Requests: reqs, Compress: true, Keeps: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*MultiDocRow{}
	for i := range rows {
		r := &rows[i]
		got[r.Method] = r
		t.Logf("%-18s top-1 %.3f (worst %.3f), log-prob %.2f, exact %d/%d, KL %.4f", r.Method, r.Top1(), r.WorstTop1(), r.LogProb(), r.Exact(), len(r.Scores), r.KL())
	}
	if len(rows) != 7 {
		t.Fatalf("%d methods, want 7 (full, packets, cacheblend, int8, int4, tova and random at 50%%)", len(rows))
	}
	full, plain, blend := got[MultiFull], got[MultiPackets], got[MultiCacheBlend+" 15%"]
	if full == nil || plain == nil || blend == nil {
		t.Fatalf("methods %v: want %q, %q and %q", got, MultiFull, MultiPackets, MultiCacheBlend+" 15%")
	}
	for _, r := range []*MultiDocRow{full, plain} {
		if !(r.Top1() >= 0.25 && r.LogProb() > math.Log(1.0/26)) {
			t.Errorf("%s: top-1 per byte %.3f, log-prob %.2f: want >= 0.25 (chance %.3f) and above ln(1/26)", r.Method, r.Top1(), r.LogProb(), Chance)
		}
	}
	if full.KL() != 0 || !(plain.KL() > 0) || !(blend.KL() > 0) {
		t.Errorf("KL: full %v, packets %v, cacheblend %v: want 0, > 0 and > 0", full.KL(), plain.KL(), blend.KL())
	}
	// The question's and the value's positions split each request's KL.
	for i, s := range plain.Scores {
		r := reqs[i]
		q, n := float64(len(r.Question)-1), float64(len(r.Question)+len(r.Value))
		if d := math.Abs(s.QuestionKL*q + s.ValueKL*(n-q) - s.KL*n); !(d <= 1e-9*n) || !(s.QuestionKL > 0) || !(s.ValueKL > 0) {
			t.Errorf("request %d: KL %v over %v positions, question %v over %v, value %v: the parts do not add up", i, s.KL, n, s.QuestionKL, q, s.ValueKL)
		}
		if f := full.Scores[i]; f.QuestionKL != 0 || f.ValueKL != 0 {
			t.Errorf("request %d: full recompute's question KL %v, value KL %v, want 0", i, f.QuestionKL, f.ValueKL)
		}
	}
	// Requests measured at once give the same rows; an adapter's packets
	// are compressed as the plain ones are.
	nl, err := adapter.InitToken(m, 1, 0, '\n')
	if err != nil {
		t.Fatal(err)
	}
	par, err := RunMultiDoc(MultiDocConfig{Model: m, Requests: reqs, Compress: true, Keeps: []float64{0.5}, Workers: 3,
		Adapters: []MultiDocAdapter{{Name: "nl", Adapter: nl}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range par {
		names = append(names, r.Method)
		if want, ok := got[r.Method]; ok && !reflect.DeepEqual(r, *want) {
			t.Errorf("%s: 3 workers and an adapter give other scores than one worker", r.Method)
		}
	}
	wantNames := []string{MultiFull, MultiPackets, MultiCacheBlend + " 15%", "adapter nl", MultiInt8, MultiInt4, MultiTOVA + " 50%", MultiRandom + " 50%",
		"adapter nl int8", "adapter nl int4", "adapter nl tova 50%", "adapter nl random 50%"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("methods %q, want %q", names, wantNames)
	}
	if par[3].KL() == par[8].KL() && par[3].KL() == par[10].KL() {
		t.Errorf("the adapter's int8 and TOVA packets decode as its uncompressed ones (KL %v)", par[3].KL())
	}
}

// TestMultiDocRequests: requests fit the limit, their documents are whole
// lines, the needle's holds the definition once at a line start and no
// other document holds it, and the continuation is the recall line and
// the value.
func TestMultiDocRequests(t *testing.T) {
	testenv.GoToolchain(t)
	dir, err := GoSrcDir("strings")
	if err != nil {
		t.Fatal(err)
	}
	files, err := HeldOutGoFiles(dir, 800)
	if err != nil {
		t.Fatal(err)
	}
	spec := MultiDocSpec{Requests: 10, DocsMin: 4, DocsMax: 8, DocMin: 150, DocMax: 400, Seed: 3}
	reqs, err := MultiDocRequests(files, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if len(r.Docs) != 4+i%5 || r.Len() > 2048 || r.Needle < 0 || r.Needle >= len(r.Docs) {
			t.Fatalf("request %d: %d documents, %d tokens, needle %d", i, len(r.Docs), r.Len(), r.Needle)
		}
		def := "const " + r.Name + ` = "` + r.Value + "\"\n"
		for d, doc := range r.Docs {
			s := string(bytesOf(doc))
			n := strings.Count(s, def)
			if len(doc) > spec.DocMax || !strings.HasSuffix(s, "\n") || (d == r.Needle) != (n == 1) || n > 1 ||
				(n == 1 && !strings.HasPrefix(s, def) && !strings.Contains(s, "\n"+def)) {
				t.Fatalf("request %d document %d (needle %d): %d bytes, %d definitions: %q", i, d, r.Needle, len(doc), n, s)
			}
		}
		if got, want := string(bytesOf(r.Continuation())), "\treturn "+r.Name+` // "`+r.Value; got != want {
			t.Fatalf("request %d: continuation %q, want %q", i, got, want)
		}
	}
	if _, err := MultiDocRequests(files, MultiDocSpec{Requests: 1, DocsMin: 8, DocsMax: 8, DocMin: 300, DocMax: 400}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("8 documents of 300 bytes in 2,048 tokens: %v, want ErrInvalidArgument", err)
	}
}

func bytesOf(t []int) []byte {
	b := make([]byte, len(t))
	for i, x := range t {
		b[i] = byte(x)
	}
	return b
}

// TestCacheBlendBounds: CacheBlend recomputing every document token gives
// the full prefill's KV, and recomputing none gives the full prefill's at
// layer 0 and the packets' elsewhere (a random GQA model, three packets).
func TestCacheBlendBounds(t *testing.T) {
	m, err := llama.Random(llama.Config{Dim: 32, Hidden: 48, Layers: 3, Heads: 4, KVHeads: 2, Vocab: 16, SeqLen: 128, NormEps: 1e-5,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	docs := [][]int{{3, 4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15, 2, 3}}
	ctx := []int{GoBOS}
	var packets []*llama.Cache
	for _, d := range docs {
		ctx = append(ctx, d...)
		res, err := m.Forward(d, 0, nil, llama.ForwardOptions{LastOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		packets = append(packets, res.Cache)
	}
	bos, err := m.Forward(ctx[:1], 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Assemble(m, bos.Cache, packets)
	if err != nil {
		t.Fatal(err)
	}
	full, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	diff := func(a, b []float32) float64 {
		d := 0.0
		for i := range a {
			d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		}
		return d
	}
	for _, c := range []struct {
		ratio float64
		want  func(l int) *llama.Cache
	}{
		{1, func(int) *llama.Cache { return full.Cache }},
		{0.01, func(l int) *llama.Cache {
			if l == 0 {
				return full.Cache
			}
			return plain
		}},
	} {
		got, err := CacheBlend(m, ctx, plain, c.ratio)
		if err != nil {
			t.Fatal(err)
		}
		for l := range m.Layers {
			w := c.want(l).Layers[l]
			if dk, dv := diff(got.Layers[l].K, w.K), diff(got.Layers[l].V, w.V); dk > 1e-5 || dv > 1e-5 {
				t.Errorf("ratio %v layer %d: K differs by %.3g, V by %.3g", c.ratio, l, dk, dv)
			}
		}
	}
	if plain.Len() != len(ctx) || diff(plain.Layers[1].K, full.Cache.Layers[1].K) < 1e-3 {
		t.Fatalf("packets equal the full prefill at layer 1: the test would not see a recompute")
	}
}
