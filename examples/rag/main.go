// Command rag is KV Packet's retrieval-augmented generation flow on kvstore,
// end to end, with the small reference Llama of lab/llama:
//
//  1. offline, each document is prefilled alone from position 0 and its KV
//     cache stored as a packet (store.Put);
//  2. at request time the retrieved documents' packets are concatenated
//     with their keys re-rotated to their new positions (store.Assemble):
//     no document token is recomputed;
//  3. the question is prefilled over the assembled cache and the next-token
//     distribution compared with a full recompute of the whole prompt,
//     KL(full || packets);
//  4. the same with KV Packet adapter packets: each document prefilled
//     alone as [header; doc; trailer] with a trained adapter (package
//     adapter; trained at run time by lab/train from -adapter-init,
//     by default a hidden BOS header, or loaded from the store with
//     -adapter), stored as an artifact, its packets naming it.
//
// It uses gocode-hd64 (real weights, 64-wide heads, trained on Go source;
// the quality harness's default real model) found in -testdata (default
// $KVSTORE_TESTDATA, else ../shared/testdata), stories260K with -model
// stories, any llama2.c checkpoint with -model PATH.bin, otherwise (or
// with -model random) a deterministic random-weight Llama-shaped model, and
// says which and why. See README.md for what the numbers mean.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/kvstore/kvstore/store"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "store directory (default: a temporary one, removed afterwards)")
	flag.StringVar(&cfg.model, "model", "gocode", "gocode (gocode-hd64.bin), stories (stories260K.bin), random, or the path of a llama2.c checkpoint (.bin); a named real model not found in -testdata falls back to random")
	flag.StringVar(&cfg.testdata, "testdata", "", "directory of gocode-hd64.bin and stories260K.bin (default $KVSTORE_TESTDATA, else ../shared/testdata)")
	flag.IntVar(&cfg.docs, "docs", 3, "documents retrieved")
	flag.IntVar(&cfg.docTokens, "doc-tokens", 48, "tokens per document")
	flag.IntVar(&cfg.questionTokens, "question-tokens", 8, "tokens of the question")
	flag.StringVar(&cfg.adapterID, "adapter", "", "adapter id to load from the store (-dir) instead of training one")
	flag.IntVar(&cfg.adapterRows, "adapter-rows", 2, "header (and, with -adapter-init stats, trailer) rows of the adapter trained at run time")
	flag.StringVar(&cfg.adapterInit, "adapter-init", "token", "run-time adapter's start: token (adapter.InitToken: a hidden BOS header, no trailer) or stats (the reference's N(mean, std) rows, header and trailer)")
	flag.IntVar(&cfg.trainRequests, "train-requests", 24, "requests the run-time adapter is trained on")
	flag.IntVar(&cfg.trainEpochs, "train-epochs", 6, "epochs of run-time training")
	flag.Parse()
	if _, err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rag:", err)
		os.Exit(1)
	}
}

// config is what main's flags set.
type config struct {
	dir                             string
	model                           string // gocode (default), stories, random or a checkpoint path
	testdata                        string // where gocode and stories are looked for ("": defaultTestdata)
	docs, docTokens, questionTokens int
	adapterID                       string
	adapterRows                     int
	adapterInit                     string // "token" (default) or "stats"
	trainRequests, trainEpochs      int
}

// result is what run measured, for tests.
type result struct {
	Model          string
	Docs           []docResult
	PromptTokens   int // documents + question
	Recomputed     int // tokens computed by the packets path: the question's
	PacketsTime    time.Duration
	FullTime       time.Duration
	KL             float64 // KL(full || packets), nats
	KLNoDocs       float64 // KL(full || question alone), nats
	NextFull       int     // argmax of the full recompute's next-token distribution
	NextPackets    int
	AssembledBytes int64
	// With the adapter's packets:
	AdapterID    string
	AdapterRows  int     // adapter rows each packet holds (a hidden header's are not kept)
	AdapterTrain float64 // seconds of run-time training, 0 when loaded
	KLAdapter    float64 // KL(full || adapter packets), nats
	NextAdapter  int
}

type docResult struct {
	ID     format.PacketID
	Tokens int
	Bytes  int64
}

const namespace = "rag-example"

func run(w io.Writer, cfg config) (*result, error) {
	cfg.docs = max(cfg.docs, 1)
	cfg.docTokens = max(cfg.docTokens, 2)
	cfg.questionTokens = max(cfg.questionTokens, 1)
	m, name, err := loadModel(w, cfg.model, cfg.testdata)
	if err != nil {
		return nil, err
	}
	res := &result{Model: name}
	fmt.Fprintf(w, "model: %s\n", name)
	db, cleanup, err := openStore(cfg.dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	defer db.Close()
	spec := m.Spec(format.DTypeF32, name) // a server stores its model's dtype, typically bf16

	rng := rand.New(rand.NewPCG(7, 3))
	var docs [][]int
	for range cfg.docs {
		docs = append(docs, sample(m, rng, cfg.docTokens))
	}
	question := sample(m, rng, cfg.questionTokens)
	fmt.Fprintln(w, "\noffline: each document prefilled alone at position 0 and stored as a packet")
	fmt.Fprintf(w, "  %-16s %7s %9s %12s\n", "packet", "tokens", "bytes", "prefill+put")
	var items []store.AssembleItem
	offset := int64(0)
	for _, doc := range docs {
		start := time.Now()
		id, err := storeDoc(db, m, spec, doc)
		if err != nil {
			return nil, err
		}
		d := docResult{ID: id, Tokens: len(doc), Bytes: int64(len(doc) * spec.TokenBytes())}
		res.Docs = append(res.Docs, d)
		fmt.Fprintf(w, "  %-16s %7d %9d %12v\n", id.Short(), d.Tokens, d.Bytes, time.Since(start).Round(time.Microsecond))
		items = append(items, store.AssembleItem{ID: id, Offset: offset})
		offset += int64(len(doc))
	}

	packets, err := answerFromPackets(db, m, spec, items, question, res)
	if err != nil {
		return nil, err
	}
	var prompt []int
	for _, doc := range docs {
		prompt = append(prompt, doc...)
	}
	prompt = append(prompt, question...)
	res.PromptTokens = len(prompt)
	start := time.Now()
	full, err := m.Forward(prompt, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	res.FullTime = time.Since(start)
	alone, err := m.Forward(question, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	p, q := llama.Probs(full.Logits[0]), llama.Probs(packets)
	res.KL, res.KLNoDocs = llama.KL(p, q), llama.KL(p, llama.Probs(alone.Logits[0]))
	res.NextFull, res.NextPackets = llama.Argmax(p), llama.Argmax(q)
	a, err := getAdapter(w, db, m, spec, cfg, res)
	if err != nil {
		return nil, err
	}
	withAdapter, err := adapterPackets(db, m, spec, a, res.AdapterID, docs, question)
	if err != nil {
		return nil, err
	}
	qa := llama.Probs(withAdapter)
	res.KLAdapter, res.NextAdapter = llama.KL(p, qa), llama.Argmax(qa)
	report(w, res, len(docs), len(question))
	return res, nil
}

// getAdapter loads cfg.adapterID from the store, or trains an adapter on
// requests of the example's own kind (documents and question sampled from
// the model) and stores it.
func getAdapter(w io.Writer, db *store.DB, m *llama.Model, spec *format.ModelSpec, cfg config, res *result) (*adapter.Adapter, error) {
	fp := spec.Fingerprint()
	if cfg.adapterID != "" {
		a, err := adapter.Get(db, fp, cfg.adapterID)
		if err != nil {
			return nil, err
		}
		res.AdapterID, res.AdapterRows = cfg.adapterID, a.StoredHeaderRows()+a.TrailerRows()
		fmt.Fprintf(w, "\nadapter %s loaded from the store: %d header + %d trailer rows\n", cfg.adapterID, a.HeaderRows(), a.TrailerRows())
		return a, nil
	}
	rng := rand.New(rand.NewPCG(11, 5)) // not the request's stream: training requests are other documents
	var exs []*llama.PacketExample
	for range max(cfg.trainRequests, 1) {
		var docs [][]int
		for range max(cfg.docs, 2) {
			docs = append(docs, sample(m, rng, cfg.docTokens))
		}
		ex, err := train.Example(m, nil, docs, sample(m, rng, cfg.questionTokens), 2)
		if err != nil {
			return nil, err
		}
		exs = append(exs, ex)
	}
	n := max(cfg.adapterRows, 1)
	init, err := adapter.Init(m, n, n, 1)
	if cfg.adapterInit != "stats" {
		if cfg.adapterInit != "" && cfg.adapterInit != "token" {
			return nil, fmt.Errorf("-adapter-init %q: want token or stats", cfg.adapterInit)
		}
		init, err = adapter.InitToken(m, n, 0, 1)
	}
	if err != nil {
		return nil, err
	}
	r, err := train.Train(context.Background(), m, exs, train.Options{Init: init, LR: 5e-3, Epochs: max(cfg.trainEpochs, 1), Batch: 4, Seed: 1})
	if err != nil {
		return nil, err
	}
	a := r.Adapter
	res.AdapterID, res.AdapterRows, res.AdapterTrain = a.ID(), a.StoredHeaderRows()+a.TrailerRows(), r.Time.Seconds()
	if err := adapter.Put(db, fp, res.AdapterID, a); err != nil {
		return nil, err
	}
	hidden := ""
	if a.HideHeader {
		hidden = ", header hidden"
	}
	fmt.Fprintf(w, "\nadapter %s trained at run time on %d requests (%d+%d rows%s, %d epochs, %.1f s; loss %.3f -> %.3f) and stored\n",
		res.AdapterID, len(exs), a.HeaderRows(), a.TrailerRows(), hidden, len(r.EpochLoss), r.Time.Seconds(), r.EpochLoss[0], r.EpochLoss[len(r.EpochLoss)-1])
	return a, nil
}

// adapterPackets stores each document as an adapter packet (prefilled
// alone as [header; doc; trailer]), assembles them and prefills the
// question after them, returning the next-token logits.
func adapterPackets(db *store.DB, m *llama.Model, spec *format.ModelSpec, a *adapter.Adapter, id string, docs [][]int, question []int) ([]float32, error) {
	var items []store.AssembleItem
	offset := int64(0)
	for _, doc := range docs {
		p, err := adapter.Packet(m, spec, namespace, id, a, doc)
		if err != nil {
			return nil, err
		}
		pid, err := db.Put(context.Background(), p)
		if err != nil {
			return nil, err
		}
		items = append(items, store.AssembleItem{ID: pid, Offset: offset})
		offset += int64(p.Tokens())
	}
	asm, err := db.PrepareAssemble(context.Background(), namespace, spec.Fingerprint(), items)
	if err != nil {
		return nil, err
	}
	defer asm.Release()
	dst := store.NewContiguousDest(spec, asm.Tokens())
	if err := asm.Run(context.Background(), dst, nil); err != nil {
		return nil, err
	}
	cache, err := destCache(spec, dst, asm.Tokens())
	if err != nil {
		return nil, err
	}
	out, err := m.Forward(question, int64(asm.Tokens()), cache, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	return out.Logits[0], nil
}

// answerFromPackets assembles the documents' packets and prefills the
// question after them, returning the next-token logits.
func answerFromPackets(db *store.DB, m *llama.Model, spec *format.ModelSpec, items []store.AssembleItem, question []int, res *result) ([]float32, error) {
	start := time.Now()
	a, err := db.PrepareAssemble(context.Background(), namespace, spec.Fingerprint(), items)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	dst := store.NewContiguousDest(spec, a.Tokens())
	if err := a.Run(context.Background(), dst, nil); err != nil {
		return nil, err
	}
	cache, err := destCache(spec, dst, a.Tokens())
	if err != nil {
		return nil, err
	}
	out, err := m.Forward(question, int64(a.Tokens()), cache, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	res.PacketsTime = time.Since(start)
	res.Recomputed = len(question)
	res.AssembledBytes = int64(a.Tokens() * spec.TokenBytes())
	return out.Logits[0], nil
}

func report(w io.Writer, r *result, docs, question int) {
	fmt.Fprintf(w, "\nrequest: %d documents (%d tokens) + a question (%d tokens)\n", docs, r.PromptTokens-question, question)
	fmt.Fprintf(w, "  %-26s %18s %12s %6s\n", "path", "tokens computed", "time", "next")
	fmt.Fprintf(w, "  %-26s %18s %12v %6d\n", "packets (Assemble)", fmt.Sprintf("%d (0 of documents)", r.Recomputed),
		r.PacketsTime.Round(time.Microsecond), r.NextPackets)
	fmt.Fprintf(w, "  %-26s %18d %12v %6d\n", "full recompute", r.PromptTokens, r.FullTime.Round(time.Microsecond), r.NextFull)
	fmt.Fprintf(w, "\nKL(full || packets)         = %.4f nats  (next %d)\n", r.KL, r.NextPackets)
	fmt.Fprintf(w, "KL(full || adapter packets) = %.4f nats  (next %d; adapter %s, %d extra rows per packet)\n", r.KLAdapter, r.NextAdapter, r.AdapterID, r.AdapterRows)
	fmt.Fprintf(w, "KL(full || question alone)  = %.4f nats  (the documents ignored altogether)\n", r.KLNoDocs)
	fmt.Fprintln(w, "KL > 0 is expected without adapters; what a trained adapter does on these small models: see README.md.")
}

// loadModel returns the real model named (found in testdata) or given by
// path, else a random Llama, saying on w why a named model was not used.
func loadModel(w io.Writer, model, testdata string) (*llama.Model, string, error) {
	files := map[string]string{"": "gocode-hd64.bin", "gocode": "gocode-hd64.bin", "stories": "stories260K.bin", "random": ""}
	file, named := files[model]
	path := model
	switch {
	case !named && !strings.HasSuffix(model, ".bin"):
		return nil, "", fmt.Errorf("-model %q: want gocode, stories, random or a llama2.c checkpoint (.bin)", model)
	case named && file == "":
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
			return nil, "", fmt.Errorf("-model %s: %w", path, err)
		}
		return m, strings.TrimSuffix(filepath.Base(path), ".bin") + " (real weights, " + path + ")", nil
	}
	m, err := llama.Random(llama.Config{Dim: 128, Hidden: 256, Layers: 4, Heads: 4, KVHeads: 2, Vocab: 256, SeqLen: 4096,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}, 1)
	return m, "random-weight Llama-shaped model", err
}

// defaultTestdata is $KVSTORE_TESTDATA, else ../shared/testdata (where
// the repository's test models sit, seen from its root).
func defaultTestdata() string {
	if d := os.Getenv("KVSTORE_TESTDATA"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "testdata")
}

// openStore opens dir, or a temporary directory removed by cleanup.
func openStore(dir string) (*store.DB, func(), error) {
	cleanup := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kvstore-rag-")
		if err != nil {
			return nil, nil, err
		}
		dir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return db, cleanup, nil
}

// storeDoc prefills doc alone at position 0 (adapter.Packet with no
// adapter) and puts its KV.
func storeDoc(db *store.DB, m *llama.Model, spec *format.ModelSpec, doc []int) (format.PacketID, error) {
	p, err := adapter.Packet(m, spec, namespace, "", nil, doc)
	if err != nil {
		return format.PacketID{}, err
	}
	return db.Put(context.Background(), p)
}

// destCache turns an assembled contiguous destination into a cache at
// positions 0..tokens-1 (the items were placed consecutively from 0).
func destCache(spec *format.ModelSpec, d *store.Dest, tokens int) (*llama.Cache, error) {
	c := &llama.Cache{KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, Layers: make([]llama.LayerKV, spec.Layers)}
	for l := range c.Layers {
		k, v := make([]float32, len(d.K[l])/spec.DType.Size()), make([]float32, len(d.V[l])/spec.DType.Size())
		if err := format.ToF32(k, d.K[l], spec.DType); err != nil {
			return nil, err
		}
		if err := format.ToF32(v, d.V[l], spec.DType); err != nil {
			return nil, err
		}
		c.Layers[l] = llama.LayerKV{K: k, V: v}
	}
	for i := range tokens {
		c.Positions = append(c.Positions, int64(i))
	}
	return c, nil
}

// sample draws n tokens from the model itself, starting from BOS (token
// 1), so that documents look like its training text to it.
func sample(m *llama.Model, rng *rand.Rand, n int) []int {
	toks := []int{1}
	out, err := m.Forward(toks, 0, nil, llama.ForwardOptions{LastOnly: true})
	for err == nil && len(toks) < n {
		next := draw(rng, llama.Probs(out.Logits[0]))
		toks = append(toks, next)
		out, err = m.Forward([]int{next}, int64(len(toks)-1), out.Cache, llama.ForwardOptions{LastOnly: true})
	}
	return toks
}

func draw(rng *rand.Rand, p []float64) int {
	u := rng.Float64()
	for i, pi := range p {
		if u -= pi; u <= 0 {
			return i
		}
	}
	return len(p) - 1
}
