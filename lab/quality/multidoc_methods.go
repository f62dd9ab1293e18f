package quality

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/prune"
)

// Methods of RunMultiDoc, in report order. Pruned and quantized packets
// are plain packets, each compressed alone as a store would keep it; an
// adapter's rows are named "adapter NAME".
const (
	MultiFull       = "full recompute"
	MultiPackets    = "packets"
	MultiCacheBlend = "cacheblend"
	MultiInt8       = "packets int8"
	MultiInt4       = "packets int4"
	MultiTOVA       = "packets tova"
	MultiRandom     = "packets random"
)

// DefaultBlendRatio is CacheBlend's recompute ratio, its released
// implementation's (LMCache: check layer 1, ratio 0.15).
const DefaultBlendRatio = 0.15

// multiDocTOVAQueries is TOVA's observation window on a packet: the
// attention of its last 32 queries, summed (as RunPackets').
const multiDocTOVAQueries = 32

// MultiDocAdapter is an adapter measured by RunMultiDoc, under a name.
type MultiDocAdapter struct {
	Name    string
	Adapter *adapter.Adapter
}

// MultiDocConfig is a multi-document needle measurement.
type MultiDocConfig struct {
	Model    *llama.Model
	Requests []*MultiDocRequest
	// Keeps are the kept fractions of TOVA and random pruning (nil: 0.5,
	// 0.25, 0.1); BlendRatio CacheBlend's share of document tokens
	// recomputed (0: DefaultBlendRatio).
	Keeps      []float64
	BlendRatio float64
	Adapters   []MultiDocAdapter
	// Compress: measure int8, int4 and pruning (else full recompute,
	// packets, CacheBlend and adapters only).
	Compress bool
	Seed     uint64
	// Workers is how many requests are measured at once (0: 1). The rows
	// do not depend on it: each request's methods are seeded by its index.
	Workers int
	// Progress, when not nil, is called after each request, in the order
	// they finish (request i's index), never twice at once.
	Progress func(i int, r *MultiDocRequest, elapsed time.Duration)
}

// RunMultiDoc measures every method on every request.
func RunMultiDoc(cfg MultiDocConfig) ([]MultiDocRow, error) {
	m := cfg.Model
	if m == nil || len(cfg.Requests) == 0 {
		return nil, fmt.Errorf("%w: quality: multi-document needles: model %v, %d requests", format.ErrInvalidArgument, m != nil, len(cfg.Requests))
	}
	if cfg.Keeps == nil {
		cfg.Keeps = []float64{0.5, 0.25, 0.1}
	}
	if cfg.BlendRatio == 0 {
		cfg.BlendRatio = DefaultBlendRatio
	}
	if !(cfg.BlendRatio > 0 && cfg.BlendRatio <= 1) {
		return nil, fmt.Errorf("%w: quality: cacheblend ratio %v", format.ErrInvalidArgument, cfg.BlendRatio)
	}
	start := time.Now()
	runs := make([][]multiRun, len(cfg.Requests))
	errs := make([]error, len(cfg.Requests))
	next := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(max(cfg.Workers, 1), len(cfg.Requests)) {
		wg.Go(func() {
			for i := range next {
				runs[i], errs[i] = runMultiDocMethods(&cfg, cfg.Requests[i], cfg.Seed+uint64(i))
				if errs[i] == nil && cfg.Progress != nil {
					mu.Lock()
					cfg.Progress(i, cfg.Requests[i], time.Since(start))
					mu.Unlock()
				}
			}
		})
	}
	for i := range cfg.Requests {
		next <- i
	}
	close(next)
	wg.Wait()
	var rows []MultiDocRow
	for i, r := range cfg.Requests {
		if errs[i] != nil {
			return nil, fmt.Errorf("quality: multi-document request %d: %w", i, errs[i])
		}
		if rows == nil {
			for _, x := range runs[i] {
				rows = append(rows, MultiDocRow{Method: x.name})
			}
		}
		for j, x := range runs[i] {
			rows[j].Scores = append(rows[j].Scores, scoreMultiDoc(r, runs[i][0].logits, x.logits))
		}
	}
	return rows, nil
}

type multiRun struct {
	name   string
	logits [][]float32
}

// runMultiDocMethods decodes r's continuation with every method, full
// recompute first.
func runMultiDocMethods(cfg *MultiDocConfig, r *MultiDocRequest, seed uint64) ([]multiRun, error) {
	m := cfg.Model
	ctx, cont := r.Context(), r.Continuation()
	var out []multiRun
	add := func(name string, c *llama.Cache, keep *prune.Set) error {
		var meth method = keepRows(c, allTokens(c.Len()))
		if keep != nil {
			meth = keptRows(c, keep)
		}
		logits, err := decode(m, meth, cont, c.Len())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, multiRun{name: name, logits: logits})
		return nil
	}
	full, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	if err := add(MultiFull, full.Cache, nil); err != nil {
		return nil, err
	}
	bos, err := m.Forward(ctx[:1], 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	packets := make([]*llama.Cache, len(r.Docs))
	atts := make([][][][][]float32, len(r.Docs))
	for d, doc := range r.Docs {
		res, err := m.Forward(doc, 0, nil, llama.ForwardOptions{LastOnly: true, Attention: cfg.Compress})
		if err != nil {
			return nil, err
		}
		packets[d], atts[d] = res.Cache, res.Attention
	}
	plain, err := Assemble(m, bos.Cache, packets)
	if err != nil {
		return nil, err
	}
	if err := add(MultiPackets, plain, nil); err != nil {
		return nil, err
	}
	blend, err := CacheBlend(m, ctx, plain, cfg.BlendRatio)
	if err != nil {
		return nil, err
	}
	if err := add(fmt.Sprintf("%s %g%%", MultiCacheBlend, 100*cfg.BlendRatio), blend, nil); err != nil {
		return nil, err
	}
	adapted := make([][]*llama.Cache, len(cfg.Adapters))
	for i, a := range cfg.Adapters {
		ps := make([]*llama.Cache, len(r.Docs))
		for d, doc := range r.Docs {
			kv, err := a.Adapter.Prefill(m, doc)
			if err != nil {
				return nil, fmt.Errorf("adapter %s: %w", a.Name, err)
			}
			if ps[d], err = m.CacheOf(kv.K, kv.V); err != nil {
				return nil, err
			}
		}
		c, err := Assemble(m, bos.Cache, ps)
		if err != nil {
			return nil, err
		}
		if err := add("adapter "+a.Name, c, nil); err != nil {
			return nil, err
		}
		adapted[i] = ps
	}
	if !cfg.Compress {
		return out, nil
	}
	if err := compressedRuns(m, cfg.Keeps, "", bos.Cache, packets, atts, seed, add); err != nil {
		return nil, err
	}
	for i, a := range cfg.Adapters {
		// TOVA votes with the document's own prefill: a hidden header's
		// packet has the same rows; a visible adapter's has others, and
		// is not TOVA-pruned.
		var votes [][][][][]float32
		if a.Adapter.HideHeader && a.Adapter.TrailerRows() == 0 {
			votes = atts
		}
		if err := compressedRuns(m, cfg.Keeps, "adapter "+a.Name+" ", bos.Cache, adapted[i], votes, seed, add); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compressedRuns decodes the request with its packets quantized (int8,
// int4) and pruned (TOVA by atts, each packet's own prefill attention,
// when not nil; seeded random), each packet alone, the methods named
// after prefix.
func compressedRuns(m *llama.Model, keeps []float64, prefix string, bos *llama.Cache, packets []*llama.Cache, atts [][][][][]float32, seed uint64,
	add func(string, *llama.Cache, *prune.Set) error) error {
	name := func(method string) string { return prefix + strings.TrimPrefix(method, "packets ") }
	if prefix == "" {
		name = func(method string) string { return method }
	}
	for _, q := range []struct {
		name  string
		codec format.Codec
	}{{MultiInt8, format.CodecInt8}, {MultiInt4, format.CodecInt4}} {
		ps := make([]*llama.Cache, len(packets))
		for d, p := range packets {
			var err error
			if ps[d], err = quantized(p, q.codec); err != nil {
				return fmt.Errorf("%s: %w", name(q.name), err)
			}
		}
		c, err := Assemble(m, bos, ps)
		if err != nil {
			return err
		}
		if err := add(name(q.name), c, nil); err != nil {
			return err
		}
	}
	assembled, err := Assemble(m, bos, packets)
	if err != nil {
		return err
	}
	for _, policy := range []string{MultiTOVA, MultiRandom} {
		if policy == MultiTOVA && atts == nil {
			continue
		}
		for _, f := range keeps {
			keep, err := packetKeep(m, packets, atts, policy, f, seed)
			if err != nil {
				return fmt.Errorf("%s %g: %w", name(policy), f, err)
			}
			if err := add(fmt.Sprintf("%s %g%%", name(policy), 100*f), assembled, keep); err != nil {
				return err
			}
		}
	}
	return nil
}

// Assemble returns prefix (a cache from position 0) followed by every
// packet (each a cache from position 0) re-rotated to start where the
// rows before it end (Cache.Shift, as store.Assemble rotates stored
// packets): a request read from packets. The inputs are not changed.
func Assemble(m *llama.Model, prefix *llama.Cache, packets []*llama.Cache) (*llama.Cache, error) {
	c := prefix.Clone()
	for i, p := range packets {
		q := p.Clone()
		if err := q.Shift(m.RoPE(), int64(c.Len())); err != nil {
			return nil, fmt.Errorf("quality: packet %d: %w", i, err)
		}
		if err := c.Append(q); err != nil {
			return nil, fmt.Errorf("quality: packet %d: %w", i, err)
		}
	}
	return c, nil
}

// quantized returns p's keys and values encoded with codec c (f32 chunks,
// the codec's default options) and decoded back, pre-RoPE keys dropped.
func quantized(p *llama.Cache, c format.Codec) (*llama.Cache, error) {
	q := &llama.Cache{KVHeads: p.KVHeads, HeadDim: p.HeadDim, Layers: make([]llama.LayerKV, len(p.Layers)),
		Positions: slices.Clone(p.Positions)}
	for l, kv := range p.Layers {
		for _, x := range []struct {
			kind format.ChunkKind
			src  []float32
			dst  *[]float32
		}{{format.ChunkK, kv.K, &q.Layers[l].K}, {format.ChunkV, kv.V, &q.Layers[l].V}} {
			d := codec.Desc{Kind: x.kind, DType: format.DTypeF32, Heads: p.KVHeads, Tokens: p.Len(), HeadDim: p.HeadDim}
			raw := make([]byte, d.RawSize())
			if err := format.FromF32(raw, x.src, format.DTypeF32); err != nil {
				return nil, err
			}
			enc, err := codec.Encode(nil, raw, c, d, codec.Options{})
			if err != nil {
				return nil, err
			}
			if err := codec.Decode(raw, enc, c, d); err != nil {
				return nil, err
			}
			*x.dst = make([]float32, len(x.src))
			if err := format.ToF32(*x.dst, raw, format.DTypeF32); err != nil {
				return nil, err
			}
		}
	}
	return q, nil
}

// packetKeep prunes each packet alone (TOVA over its own prefill's last
// queries, or seeded random), keeping prune.Budget(rows, f) rows of every
// (layer, KV head), and returns the kept rows of the assembled request:
// the BOS row, then each packet's kept rows at their assembled indices.
func packetKeep(m *llama.Model, packets []*llama.Cache, atts [][][][][]float32, policy string, f float64, seed uint64) (*prune.Set, error) {
	total := 1
	for _, p := range packets {
		total += p.Len()
	}
	s := &prune.Set{Layers: m.Layers, KVHeads: m.KVHeads, Tokens: total, Keep: make([][]int32, m.Layers*m.KVHeads)}
	for g := range s.Keep {
		s.Keep[g] = []int32{0}
	}
	off := 1
	for d, p := range packets {
		n := p.Len()
		var scores [][]float32
		switch policy {
		case MultiTOVA:
			var err error
			if scores, err = prune.TOVAScores(atts[d], m.KVHeads, n, min(n, multiDocTOVAQueries)); err != nil {
				return nil, err
			}
		case MultiRandom:
			scores = prune.RandomScores(m.Layers, m.KVHeads, n, seed*131+uint64(d))
		default:
			return nil, fmt.Errorf("%w: quality: pruning policy %q", format.ErrInvalidArgument, policy)
		}
		set, err := prune.Select(m.Layers, m.KVHeads, n, scores, prune.Budget(n, f), nil)
		if err != nil {
			return nil, err
		}
		for g, kept := range set.Keep {
			for _, t := range kept {
				s.Keep[g] = append(s.Keep[g], int32(off)+t)
			}
		}
		off += n
	}
	return s, nil
}

// errBlendStop ends a CacheBlend selection pass after the check layer.
var errBlendStop = errors.New("quality: cacheblend: check layer done")

// blendCheckLayer is the layer whose key deviation CacheBlend selects
// tokens by (its released implementation's check_layers = [1]).
const blendCheckLayer = 1

// CacheBlend is CacheBlend's selective recompute over an assembled cache,
// as its released implementation (LMCache's blender) does it: every
// context token runs through the layers before the check layer (layer 1)
// in full, so those layers' KV are a full prefill's; at the check layer
// each token's fresh keys (post-RoPE) are compared with the packets' and
// the ratio of document tokens whose keys deviate most (sum of squared
// differences over KV heads and dimensions) are selected; from the check
// layer on only the selected tokens are recomputed, each attending over
// the packets' rows with the earlier selected tokens' rows recomputed,
// and their KV replace the packets'. The other tokens keep the packets'
// KV from the check layer on. ctx is the request's BOS and documents;
// assembled their packets' cache (BOS first, never selected: its row is
// the same either way). The result is a new cache.
func CacheBlend(m *llama.Model, ctx []int, assembled *llama.Cache, ratio float64) (*llama.Cache, error) {
	n, hd, kvh := len(ctx), m.HeadDim(), m.KVHeads
	if assembled.Len() != n || m.Layers <= blendCheckLayer {
		return nil, fmt.Errorf("%w: quality: cacheblend over %d rows for %d tokens, %d layers", format.ErrInvalidArgument, assembled.Len(), n, m.Layers)
	}
	out := assembled.Clone()
	for l := range out.Layers {
		out.Layers[l].KPre = nil
	}
	row := func(x []float32, g, t int) []float32 { return x[(g*n+t)*hd : (g*n+t+1)*hd] }
	// rowsUpTo returns (copies of) rows 0..t-1 of head g of x, then own.
	rowsUpTo := func(x []float32, g, t int, own []float32) []float32 {
		out := make([]float32, 0, (t+1)*hd)
		out = append(out, x[g*n*hd:(g*n+t)*hd]...)
		return append(out, own...)
	}
	group := m.Heads / kvh
	attendOver := func(a *llama.StepAttention, rows func(g int) (k, v []float32)) {
		for g := range kvh {
			k, v := rows(g)
			for h := g * group; h < (g+1)*group; h++ {
				llama.Attend(a.Out[h*hd:(h+1)*hd], a.Q[h*hd:(h+1)*hd], k, v, nil)
			}
		}
	}
	// Selection pass: layers before the check layer in full, each fresh
	// row written to out; at the check layer, the deviation.
	dev := make([]float64, n)
	for t := range n {
		_, err := m.Step(ctx[t], int64(t), func(a *llama.StepAttention) error {
			if a.Layer == blendCheckLayer {
				for g := range kvh {
					for j, x := range row(assembled.Layers[a.Layer].K, g, t) {
						d := float64(a.K[g*hd+j] - x)
						dev[t] += d * d
					}
				}
				return errBlendStop
			}
			kv := &out.Layers[a.Layer]
			for g := range kvh {
				copy(row(kv.K, g, t), a.K[g*hd:(g+1)*hd])
				copy(row(kv.V, g, t), a.V[g*hd:(g+1)*hd])
			}
			attendOver(a, func(g int) ([]float32, []float32) {
				return kv.K[g*n*hd : (g*n+t+1)*hd], kv.V[g*n*hd : (g*n+t+1)*hd]
			})
			return nil
		})
		if err != nil && !errors.Is(err, errBlendStop) {
			return nil, err
		}
	}
	docs := n - 1
	pick := int(math.Floor(ratio * float64(docs)))
	order := make([]int, docs)
	for i := range order {
		order[i] = i + 1
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case dev[a] > dev[b]:
			return -1
		case dev[a] < dev[b]:
			return 1
		}
		return a - b
	})
	selected := slices.Clone(order[:pick])
	slices.Sort(selected)
	// Recompute pass: each selected token in order, the layers before the
	// check layer over their full rows (as the selection pass computed
	// them), the others over out's rows so far, its fresh rows written.
	for _, t := range selected {
		_, err := m.Step(ctx[t], int64(t), func(a *llama.StepAttention) error {
			kv := &out.Layers[a.Layer]
			if a.Layer >= blendCheckLayer {
				for g := range kvh {
					copy(row(kv.K, g, t), a.K[g*hd:(g+1)*hd])
					copy(row(kv.V, g, t), a.V[g*hd:(g+1)*hd])
				}
			}
			attendOver(a, func(g int) ([]float32, []float32) {
				return rowsUpTo(kv.K, g, t, a.K[g*hd:(g+1)*hd]), rowsUpTo(kv.V, g, t, a.V[g*hd:(g+1)*hd])
			})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
