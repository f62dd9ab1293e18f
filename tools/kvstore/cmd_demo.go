package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "store documents' KV caches as packets, verify them, Assemble them and compare with recompute",
		long:    demoSummary,
		setup:   setupDemo,
	})
}

const demoSummary = `Runs KV Packet's flow on a small model: N documents are each prefilled
alone at position 0 and Put as packets, read back through views (every
chunk's CRC32C verified, bytes compared with what was written), Assembled
in reverse order at new offsets, and a question is prefilled over the
assembled cache. It prints per packet: tokens, bytes, put time and the
verification; then the assembly time, the tokens recomputed, the largest
difference between the assembled keys and values and each document
prefilled alone at its new offset (storage rounding only), and
KL(full || packets) of the next-token distribution against a full
recompute of the concatenated prompt (> 0 without trained adapters: each
packet never saw the documents before it).

The model is a deterministic random-weight Llama-shaped model built in code
(4 layers, 4 heads, 2 KV heads, head dim 64, rotate-half RoPE with llama3
scaling), or a llama2.c checkpoint with --model (the real one to use:
../shared/testdata/gocode-hd64.bin, a byte-level Go-code Llama with 64-wide
heads; stories260K.bin is the second). The store is a temporary
directory, removed afterwards, unless --dir names one.

On a terminal a progress line shows the prefills (thousands of tokens
take a while on a CPU). SIGINT (Ctrl-C) or SIGTERM stops the demo within
one prefill chunk (exit 130); a --dir store keeps the packets put so far.`

// demoFlags are demo's flags, parsed.
type demoFlags struct {
	dir, model, dtype string
	docs, tokens      int
	question          int
	json              bool
}

// demoModel is the embedded default: Llama-shaped, small enough for a
// demo that finishes in well under a second.
var demoModel = llama.Config{Dim: 256, Hidden: 512, Layers: 4, Heads: 4, KVHeads: 2, Vocab: 512, SeqLen: 8192,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}

func setupDemo(fs *pflag.FlagSet, e *env) verbFunc {
	var f demoFlags
	fs.IntVar(&f.docs, "docs", 3, "documents to store and assemble")
	fs.IntVar(&f.tokens, "tokens", 32, "tokens per document")
	fs.IntVar(&f.question, "question", 4, "tokens of the question prefilled after the packets")
	fs.StringVar(&f.model, "model", "", "llama2.c checkpoint to use instead of the built-in random model (e.g. ../shared/testdata/gocode-hd64.bin)")
	fs.StringVar(&f.dtype, "dtype", "bf16", "storage dtype of the packets: bf16, f16 or f32")
	return func(ctx context.Context, e *env, args []string) error {
		f.dir, f.json = e.dir, e.json // the global --dir (default: a temporary store) and --json
		return runDemo(ctx, e, args, f)
	}
}

func runDemo(ctx context.Context, e *env, args []string, f demoFlags) error {
	if err := noArgs(args); err != nil {
		return err
	}
	dt, err := format.ParseDType(f.dtype)
	switch {
	case err != nil || !dt.Float():
		return fmt.Errorf("%w: --dtype %q: want bf16, f16 or f32", errUsage, f.dtype)
	case f.docs < 1 || f.docs > 64 || f.tokens < 1 || f.tokens > 4096 || f.question < 1 || f.question > 4096:
		return fmt.Errorf("%w: --docs must be in [1, 64], --tokens and --question in [1, 4096]", errUsage)
	}
	p := newProgress(e, "demo")
	rep, err := demo(ctx, f, dt, e.stderr, p)
	p.done()
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.writeTable(e.stdout)
	}
	if !rep.Verified {
		return fmt.Errorf("verification failed")
	}
	return nil
}

// demoReport is what the demo measured; --json prints it.
type demoReport struct {
	Model   string       `json:"model"`
	DType   string       `json:"dtype"`
	Store   string       `json:"store"`
	Packets []demoPacket `json:"packets"`
	// Verified is true when every packet verified.
	Verified bool `json:"verified"`
	// Assembly: the packets in reverse order, at consecutive offsets from 0.
	AssembleTokens int     `json:"assemble_tokens"`
	AssembleNs     int64   `json:"assemble_ns"`
	AssembleBytes  int64   `json:"assemble_bytes"`
	MaxDeltaK      float64 `json:"max_abs_delta_k"` // vs each document prefilled alone at its offset
	MaxDeltaV      float64 `json:"max_abs_delta_v"`
	MaxK           float64 `json:"max_abs_k"` // of those prefills, for scale
	MaxV           float64 `json:"max_abs_v"`
	// The question after the packets against a full recompute.
	Recomputed      int     `json:"tokens_recomputed"` // the question's
	FullTokens      int     `json:"full_recompute_tokens"`
	PacketsPathNs   int64   `json:"packets_path_ns"` // Assemble + question prefill
	FullRecomputeNs int64   `json:"full_recompute_ns"`
	KL              float64 `json:"kl_full_packets"` // nats
	NextPackets     int     `json:"next_token_packets"`
	NextFull        int     `json:"next_token_full"`
}

type demoPacket struct {
	ID     string `json:"id"`
	Tokens int    `json:"tokens"`
	Bytes  int64  `json:"bytes"`
	PutNs  int64  `json:"put_ns"`
	Stored bool   `json:"already_stored"` // found in --dir: not written again
	Verify string `json:"verify"`         // "ok" or what failed
}

// demoDoc is one document: its tokens, its prefill alone at 0, its packet.
type demoDoc struct {
	tokens []int
	cache  *llama.Cache
	packet *store.Packet
	id     format.PacketID
}

// demo runs the demo, showing its prefills on prog; it stops once ctx is
// done (a signal), leaving --dir's store with the packets put so far.
func demo(ctx context.Context, f demoFlags, dt format.DType, stderr io.Writer, prog *progress) (*demoReport, error) {
	m, name, weights, err := demoLoad(f.model)
	if err != nil {
		return nil, err
	}
	spec := m.Spec(dt, weights)
	db, where, cleanup, err := demoOpen(f.dir, stderr)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	defer db.Close()
	rep := &demoReport{Model: name, DType: dt.String(), Store: where, Verified: true}
	rng := rand.New(rand.NewPCG(1, 2))
	docs := make([]*demoDoc, f.docs)
	for i := range docs {
		pre := prefiller{ctx: ctx, m: m, p: prog, what: fmt.Sprintf("prefill document %d/%d", i+1, len(docs))}
		if docs[i], err = demoPut(ctx, db, pre, spec, randomTokens(rng, m.Vocab, f.tokens), rep); err != nil {
			return nil, err
		}
	}
	question := randomTokens(rng, m.Vocab, f.question)
	slices.Reverse(docs)
	pre := prefiller{ctx: ctx, m: m, p: prog, what: "prefill the question over the assembled packets"}
	packetsLogits, cache, err := demoAssemble(ctx, db, pre, spec, docs, question, rep)
	if err != nil {
		return nil, err
	}
	if err := demoCompareRows(pre, spec, docs, cache, rep); err != nil {
		return nil, err
	}
	var prompt []int
	for _, d := range docs {
		prompt = append(prompt, d.tokens...)
	}
	prompt = append(prompt, question...)
	start := time.Now()
	pre.what = "full recompute"
	full, err := pre.prefill(prompt, 0, nil)
	if err != nil {
		return nil, err
	}
	rep.FullRecomputeNs, rep.FullTokens = time.Since(start).Nanoseconds(), len(prompt)
	p, q := llama.Probs(full.Logits[0]), llama.Probs(packetsLogits)
	rep.KL, rep.NextFull, rep.NextPackets = llama.KL(p, q), llama.Argmax(p), llama.Argmax(q)
	return rep, nil
}

// demoLoad returns the model, its description and its weights id.
func demoLoad(path string) (*llama.Model, string, string, error) {
	if path != "" {
		m, err := llama.Load(path)
		if err != nil {
			return nil, "", "", err
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, "", "", err
		}
		return m, fmt.Sprintf("%s (llama2.c checkpoint)", path), fmt.Sprintf("llama2.c:%s:%d", filepath.Base(path), st.Size()), nil
	}
	m, err := llama.Random(demoModel, 1)
	c := demoModel
	return m, fmt.Sprintf("random-weight Llama-shaped model (%d layers, %d heads, %d KV heads, head dim %d, %v RoPE, %v scaling)",
		c.Layers, c.Heads, c.KVHeads, c.HeadDim(), c.RoPE.Style, c.RoPE.Scaling), "kvstore-demo-random-seed1", err
}

// demoOpen opens dir, or a temporary store removed by cleanup.
func demoOpen(dir string, stderr io.Writer) (*store.DB, string, func(), error) {
	cleanup, where := func() {}, dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kvstore-demo-")
		if err != nil {
			return nil, "", nil, err
		}
		dir, where, cleanup = tmp, tmp+" (temporary)", func() { os.RemoveAll(tmp) }
	}
	db, err := store.Open(dir, &store.Options{Logger: warnLogger(stderr)})
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return db, where, cleanup, nil
}

func randomTokens(rng *rand.Rand, vocab, n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = 2 + rng.IntN(vocab-2)
	}
	return t
}

// demoPut prefills tokens alone at position 0, puts the cache as a packet
// and verifies it through a view.
func demoPut(ctx context.Context, db *store.DB, pre prefiller, spec *format.ModelSpec, tokens []int, rep *demoReport) (*demoDoc, error) {
	out, err := pre.prefill(tokens, 0, nil)
	if err != nil {
		return nil, err
	}
	d := &demoDoc{tokens: tokens, cache: out.Cache}
	k, v := out.Cache.KeysValues()
	if d.packet, err = adapter.CachePacket(spec, demoNamespace, tokens, &adapter.KV{KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, K: k, V: v}); err != nil {
		return nil, err
	}
	id := format.ComputePacketID(demoNamespace, spec.Fingerprint(), "", d.packet.TokenIDs)
	had, err := db.Has(ctx, demoNamespace, spec.Fingerprint(), id)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if d.id, err = db.Put(ctx, d.packet); err != nil {
		return nil, err
	}
	row := demoPacket{ID: d.id.Short(), Tokens: len(tokens), Bytes: int64(len(tokens) * spec.TokenBytes()),
		PutNs: time.Since(start).Nanoseconds(), Stored: had, Verify: "ok"}
	if err := demoVerify(ctx, db, spec, d); err != nil {
		row.Verify, rep.Verified = err.Error(), false
	}
	rep.Packets = append(rep.Packets, row)
	return d, nil
}

const demoNamespace = "demo"

// demoVerify reads every chunk of d's packet through a view (each checked
// against its CRC32C on first read) and compares it with what was put.
func demoVerify(ctx context.Context, db *store.DB, spec *format.ModelSpec, d *demoDoc) error {
	v, err := db.Get(ctx, demoNamespace, spec.Fingerprint(), d.id)
	if err != nil {
		return err
	}
	defer v.Release()
	for l, want := range d.packet.Layers {
		k, val, err := v.Layer(l)
		if err != nil {
			return err
		}
		if string(k) != string(want.K) || string(val) != string(want.V) {
			return fmt.Errorf("layer %d differs from what was put", l)
		}
	}
	return nil
}

// demoAssemble assembles the packets at consecutive offsets from 0 and
// prefills the question after them; it returns the next-token logits and
// the assembled cache.
func demoAssemble(ctx context.Context, db *store.DB, pre prefiller, spec *format.ModelSpec, docs []*demoDoc, question []int, rep *demoReport) ([]float32, *llama.Cache, error) {
	items := make([]store.AssembleItem, len(docs))
	off := int64(0)
	for i, d := range docs {
		items[i] = store.AssembleItem{ID: d.id, Offset: off}
		off += int64(len(d.tokens))
	}
	start := time.Now()
	a, err := db.PrepareAssemble(ctx, demoNamespace, spec.Fingerprint(), items)
	if err != nil {
		return nil, nil, err
	}
	defer a.Release()
	dst := store.NewContiguousDest(spec, a.Tokens())
	if err := a.Run(ctx, dst, nil); err != nil {
		return nil, nil, err
	}
	rep.AssembleNs = time.Since(start).Nanoseconds()
	rep.AssembleTokens, rep.AssembleBytes = a.Tokens(), int64(a.Tokens()*spec.TokenBytes())
	cache := &llama.Cache{KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, Layers: make([]llama.LayerKV, spec.Layers)}
	for l := range cache.Layers {
		k, v := make([]float32, len(dst.K[l])/spec.DType.Size()), make([]float32, len(dst.V[l])/spec.DType.Size())
		if err := format.ToF32(k, dst.K[l], spec.DType); err != nil {
			return nil, nil, err
		}
		if err := format.ToF32(v, dst.V[l], spec.DType); err != nil {
			return nil, nil, err
		}
		cache.Layers[l] = llama.LayerKV{K: k, V: v}
	}
	for i := range a.Tokens() {
		cache.Positions = append(cache.Positions, int64(i))
	}
	assembled := cache.Clone() // Forward appends the question to cache
	out, err := pre.prefill(question, int64(a.Tokens()), cache)
	if err != nil {
		return nil, nil, err
	}
	rep.PacketsPathNs = time.Since(start).Nanoseconds()
	rep.Recomputed = len(question)
	return out.Logits[0], assembled, nil
}

// demoCompareRows compares each document's rows of the assembled cache
// with the document prefilled alone at its new offset.
func demoCompareRows(pre prefiller, spec *format.ModelSpec, docs []*demoDoc, c *llama.Cache, rep *demoReport) error {
	total, row := c.Len(), 0
	hd := spec.HeadDim
	for di, d := range docs {
		n := len(d.tokens)
		pre.what = fmt.Sprintf("prefill document %d/%d at its offset", di+1, len(docs))
		at, err := pre.prefill(d.tokens, int64(row), nil)
		if err != nil {
			return err
		}
		for l, kv := range at.Cache.Layers {
			for h := range spec.KVHeads {
				got := c.Layers[l]
				lo := (h*total + row) * hd
				rep.MaxDeltaK = math.Max(rep.MaxDeltaK, maxAbsDelta(got.K[lo:lo+n*hd], kv.K[h*n*hd:(h+1)*n*hd]))
				rep.MaxDeltaV = math.Max(rep.MaxDeltaV, maxAbsDelta(got.V[lo:lo+n*hd], kv.V[h*n*hd:(h+1)*n*hd]))
			}
			for i := range kv.K {
				rep.MaxK = math.Max(rep.MaxK, math.Abs(float64(kv.K[i])))
				rep.MaxV = math.Max(rep.MaxV, math.Abs(float64(kv.V[i])))
			}
		}
		row += n
	}
	return nil
}

func maxAbsDelta(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func (r *demoReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "model: %s\nstore: %s, packets in %s\n\n", r.Model, r.Store, r.DType)
	fmt.Fprintf(w, "%-16s  %6s  %9s  %10s  %s\n", "packet", "tokens", "bytes", "put", "verify")
	for _, p := range r.Packets {
		put := time.Duration(p.PutNs).Round(time.Microsecond).String()
		if p.Stored {
			put = "stored"
		}
		fmt.Fprintf(w, "%-16s  %6d  %9d  %10s  %s\n", p.ID, p.Tokens, p.Bytes, put, p.Verify)
	}
	fmt.Fprintf(w, "\nassemble: %d packets, %d tokens (%d bytes) in %v, reverse order, offsets 0..%d\n",
		len(r.Packets), r.AssembleTokens, r.AssembleBytes, time.Duration(r.AssembleNs).Round(time.Microsecond), r.AssembleTokens-1)
	fmt.Fprintf(w, "max |delta| vs each document prefilled alone at its offset: K %.3g (max |K| %.3g), V %.3g (max |V| %.3g): %s rounding\n",
		r.MaxDeltaK, r.MaxK, r.MaxDeltaV, r.MaxV, r.DType)
	fmt.Fprintf(w, "tokens recomputed: %d of %d (the question); full recompute: %d\n", r.Recomputed, r.FullTokens, r.FullTokens)
	fmt.Fprintf(w, "time: packets path %v (assemble + question), full recompute %v\n",
		time.Duration(r.PacketsPathNs).Round(time.Microsecond), time.Duration(r.FullRecomputeNs).Round(time.Microsecond))
	fmt.Fprintf(w, "next token: packets %d, full %d; KL(full || packets) = %.4f nats (> 0 without trained adapters)\n",
		r.NextPackets, r.NextFull, r.KL)
}
