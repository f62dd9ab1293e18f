// Command longctx is SeKV's long-context flow on kvstore, end to end, with
// the small reference Llama of lab/llama:
//
//  1. a long context is prefilled once; its KV cache and per-token surprisal
//     become a span memory (store.BuildSpanMemory: spans cut at surprisal
//     peaks, anchors, summaries, SVD factors of pre-RoPE keys and values),
//     written in one commit (store.PutSpanMemory);
//  2. decoding, each layer routes its queries against the span summaries
//     (SpanReader.Routing, Routing.Zoom), zooms in the best spans within a
//     GPU budget, reconstructs them from their stored factors with RoPE at
//     their positions (SpanReader.ReconstructSpan) and attends over the
//     resident anchors, the zoomed spans and the tokens decoded so far;
//  3. every step's next-token distribution is compared with full attention
//     over the whole context, KL(full || span memory).
//
// It uses gocode-hd64 (real weights, 64-wide heads, trained on Go source;
// the quality harness's default real model) found in -testdata (default
// $KVSTORE_TESTDATA, else ../shared/testdata), or stories260K with -model
// stories, or any llama2.c checkpoint with -model PATH.bin; otherwise (or
// with -model random) a random-weight model with 128-dim heads, and says
// which and why. See README.md for what the numbers mean; docs/quality.md
// has the same methods measured on held-out Go text.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "store directory (default: a temporary one, removed afterwards)")
	flag.IntVar(&cfg.context, "context", 0, "context tokens (default 448 for the real models, whose seq_len is 512; 1024 for the random model)")
	flag.IntVar(&cfg.steps, "steps", 16, "tokens decoded")
	flag.Float64Var(&cfg.budget, "budget", 0.25, "GPU budget: KV rows per (layer, KV head) as a share of the context")
	flag.StringVar(&cfg.model, "model", "gocode", "gocode (gocode-hd64.bin), stories (stories260K.bin), random, or the path of a llama2.c checkpoint (.bin); a named real model not found in -testdata falls back to random")
	flag.StringVar(&cfg.testdata, "testdata", "", "directory of gocode-hd64.bin and stories260K.bin (default $KVSTORE_TESTDATA, else ../shared/testdata)")
	flag.BoolVar(&cfg.random, "random", false, "same as -model random")
	flag.BoolVar(&cfg.sizeRule, "size-rule", false, "build with the store's default size rule (a span keeps its factors only where that makes the memory smaller; a memory larger than its rows is refused, store.ErrSpanNotSmaller); off, every span is factored (store.SpanOptions.FactorAll), so the zoom path shows on these small models, whose spans mostly do not compress")
	flag.Parse()
	if _, err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "longctx:", err)
		os.Exit(1)
	}
}

type config struct {
	dir           string
	context       int
	steps         int
	budget        float64
	model         string // gocode (default), stories, random or a checkpoint path
	testdata      string // where gocode and stories are looked for ("": defaultTestdata)
	random        bool   // -model random
	minSpanRandom int    // segmentation of the random model (0: 64)
	sizeRule      bool   // -size-rule: the store's size rule instead of FactorAll
}

// result is what run measured, for tests.
type result struct {
	Model        string
	Spans        int
	Anchors      int
	FactorBytes  int64 // K and V factors of every factored span, all layers and heads
	RawBytes     int64 // the whole context's KV in the model's dtype
	Steps        []step
	MeanKL       float64
	ResidentRows int
}

type step struct {
	KL          float64
	Rows        float64 // mean GPU rows per (layer, KV head)
	Zoomed      int     // spans zoomed, all layers and heads
	Bytes       int64   // factor bytes zoomed in
	SameArgmax  bool
	NextFull    int
	NextSpanMem int
}

const namespace, contextName = "longctx-example", "conversation-1"

func run(w io.Writer, cfg config) (*result, error) {
	m, name, bos, err := loadModel(w, cfg.model, cfg.testdata, cfg.random)
	if err != nil {
		return nil, err
	}
	if cfg.context == 0 {
		cfg.context = 448
		if bos == 0 {
			cfg.context = 1024
		}
	}
	if cfg.context < 16 || cfg.steps < 1 || !(cfg.budget > 0 && cfg.budget <= 1) {
		return nil, fmt.Errorf("context %d, steps %d, budget %v: want >= 16, >= 1, (0, 1]", cfg.context, cfg.steps, cfg.budget)
	}
	res := &result{Model: name}
	fmt.Fprintf(w, "model: %s (%d layers, %d KV heads, head dim %d)\n", name, m.Layers, m.KVHeads, m.HeadDim())
	toks := sampleText(m, bos, cfg.context+cfg.steps)
	ctx, cont := toks[:cfg.context], toks[cfg.context:]

	// 1. Prefill once, keep surprisal, store the span memory.
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	db, cleanup, err := openStore(cfg.dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	seg := segment.Options{}
	if bos == 0 {
		// Spans of 64+ tokens: rank-32 factors of 128-dim rows only save
		// room past about 40 tokens.
		seg.MinSpan = 64
		if cfg.minSpanRandom > 0 {
			seg.MinSpan = cfg.minSpanRandom
		}
	}
	r, err := storeMemory(w, db, m, pre, seg, cfg.sizeRule, res)
	if err != nil {
		return nil, err
	}
	defer r.Release()

	// 2 and 3. Decode with routing and reconstruction, against full attention.
	d, err := newDecoder(m, r, cfg.budget)
	if err != nil {
		return nil, err
	}
	res.ResidentRows = len(r.Meta().Resident)
	fmt.Fprintf(w, "budget: %.0f%% = %d KV rows per (layer, KV head): %d resident (anchors), up to %d zoomed per layer\n",
		100*cfg.budget, d.budgetRows, res.ResidentRows, d.zoomRows)
	fmt.Fprintf(w, "%4s %6s %9s %7s %10s %8s %s\n", "step", "token", "rows/grp", "zoomed", "bytes", "KL", "argmax full/span")
	full := pre.Cache
	for i, tok := range cont {
		pos := int64(cfg.context + i)
		fr, err := m.Forward([]int{tok}, pos, full, llama.ForwardOptions{LastOnly: true})
		if err != nil {
			return nil, err
		}
		got, err := d.step(tok, pos)
		if err != nil {
			return nil, err
		}
		s := d.last
		s.KL = llama.LogitsKL(fr.Logits[0], got)
		s.NextFull, s.NextSpanMem = llama.LogitsArgmax(fr.Logits[0]), llama.LogitsArgmax(got)
		s.SameArgmax = s.NextFull == s.NextSpanMem
		res.Steps = append(res.Steps, s)
		res.MeanKL += s.KL / float64(len(cont))
		fmt.Fprintf(w, "%4d %6d %9.1f %7d %10d %8.4f %d/%d\n", i, tok, s.Rows, s.Zoomed, s.Bytes, s.KL, s.NextFull, s.NextSpanMem)
	}
	fmt.Fprintf(w, "mean KL(full || span memory) over %d steps: %.4f nats\n", len(cont), res.MeanKL)
	return res, nil
}

// storeMemory builds the span memory of a prefilled context, stores it and
// opens it for reading.
func storeMemory(w io.Writer, db *store.DB, m *llama.Model, pre *llama.Result, seg segment.Options, sizeRule bool, res *result) (*store.SpanReader, error) {
	n := pre.Cache.Len()
	spec := m.Spec(format.DTypeF32, "longctx-example")
	in := &store.SpanInput{Model: spec, Surprisal: make([]float32, n)}
	in.Surprisal[0] = float32(math.NaN()) // the first token has no context
	for t := 1; t < n; t++ {
		in.Surprisal[t] = float32(pre.Surprisal[t-1])
	}
	for _, kv := range pre.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	mem, err := db.BuildSpanMemory(in, &store.SpanOptions{Segment: seg, FactorAll: !sizeRule})
	if err != nil {
		return nil, err
	}
	id, err := db.PutSpanMemory(context.Background(), namespace, contextName, mem)
	if err != nil {
		return nil, err
	}
	r, err := db.OpenSpanMemory(context.Background(), namespace, spec.Fingerprint(), contextName)
	if err != nil {
		return nil, err
	}
	meta := r.Meta()
	res.Spans, res.Anchors = len(meta.Spans), len(meta.Anchors)
	res.RawBytes = int64(n) * int64(spec.TokenBytes())
	for l := range meta.Layers {
		for h := range meta.KVHeads {
			hm, err := r.Head(l, h)
			if err != nil {
				r.Release()
				return nil, err
			}
			for s := range meta.Spans {
				res.FactorBytes += int64(hm.K[s].Length) + int64(hm.V[s].Length)
			}
		}
	}
	fmt.Fprintf(w, "span memory %s: %d tokens, %d spans, %d anchors, W %q (d' = %d); factors %d bytes for a %d-byte KV cache\n",
		id.Short(), n, res.Spans, res.Anchors, meta.Projection, meta.ProjDim, res.FactorBytes, res.RawBytes)
	return r, nil
}

// defaultTestdata is $KVSTORE_TESTDATA, else ../shared/testdata (where
// the repository's test models sit, seen from its root).
func defaultTestdata() string {
	if d := os.Getenv("KVSTORE_TESTDATA"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "testdata")
}

func openStore(dir string) (*store.DB, func(), error) {
	remove := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kvstore-longctx-")
		if err != nil {
			return nil, nil, err
		}
		dir, remove = tmp, func() { _ = os.RemoveAll(tmp) }
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		remove()
		return nil, nil, err
	}
	return db, func() { _ = db.Close(); remove() }, nil
}

// loadModel returns the real model named (found in testdata) or given by
// path (BOS 1), else the random model with 128-dim heads (BOS 0), saying
// on w why a named model was not used.
func loadModel(w io.Writer, model, testdata string, random bool) (*llama.Model, string, int, error) {
	files := map[string]string{"": "gocode-hd64.bin", "gocode": "gocode-hd64.bin", "stories": "stories260K.bin", "random": ""}
	file, named := files[model]
	path := model
	switch {
	case !named && !strings.HasSuffix(model, ".bin"):
		return nil, "", 0, fmt.Errorf("-model %q: want gocode, stories, random or a llama2.c checkpoint (.bin)", model)
	case random || (named && file == ""):
		path = ""
	case named:
		if testdata == "" {
			testdata = defaultTestdata()
		}
		path = filepath.Join(testdata, file)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			fmt.Fprintf(w, "%s not found in %s (set -testdata or $KVSTORE_TESTDATA to its directory): using random weights\n", file, testdata)
			path = ""
		}
	}
	if path != "" {
		m, err := llama.Load(path)
		if err != nil {
			return nil, "", 0, fmt.Errorf("-model %s: %w", path, err)
		}
		return m, strings.TrimSuffix(filepath.Base(path), ".bin") + " (real weights)", 1, nil
	}
	m, err := llama.Random(llama.Config{Dim: 128, Hidden: 256, Layers: 2, Heads: 1, KVHeads: 1, Vocab: 256, SeqLen: 131072,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000}}, 1)
	return m, "random weights, head dim 128", 0, err
}

// sampleText draws n tokens from the model at temperature 1, from bos.
func sampleText(m *llama.Model, bos, n int) []int {
	rng := rand.New(rand.NewPCG(1, 2))
	toks := []int{bos}
	res, err := m.Forward(toks, 0, nil, llama.ForwardOptions{LastOnly: true})
	for err == nil && len(toks) < n {
		lp := llama.LogProbs(res.Logits[0])
		next, u := len(lp)-1, rng.Float64()
		for i, acc := 0, 0.0; i < len(lp); i++ {
			if acc += math.Exp(lp[i]); u < acc {
				next = i
				break
			}
		}
		toks = append(toks, next)
		res, err = m.Forward([]int{next}, int64(len(toks)-1), res.Cache, llama.ForwardOptions{LastOnly: true})
	}
	return toks[:n]
}
