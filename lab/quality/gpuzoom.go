package quality

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/gpusource"
)

// The GPU zoom path: span memory's decode loop (spanMethod) with the rows
// of its zoomed spans rebuilt on a gpu.Device instead of on the host. Per
// decode step and layer, after the same routing as the host path
// (store.Routing.Zoom with the layer's queries), a deviceZoom
//
//  1. acquires the zoomed spans' K and V factor blocks from a
//     gpu.Prefetcher (a hit when an earlier step's prefetch left the block
//     resident, a miss when Acquire loads it on demand), in the zoom's
//     score order, zoomBatch blocks at a time;
//  2. runs the fused reconstruct + RoPE kernel (gpu.Reconstructor.Run) into
//     the layer's K and V in HND f32 on the device ([KV heads][context
//     tokens][head dim], keys rotated at their context positions) and
//     releases the blocks after it on the stream;
//  3. copies the rebuilt rows back to the host, where the attention of
//     lab/llama reads them (the model runs on the host);
//  4. prefetches for the coming steps: the zoomed spans and, per KV head,
//     the Lookahead best-scored spans not zoomed, with this step's routing
//     scores; the prefetcher keeps the best-scored blocks within its byte
//     budget and evicts the lowest-scored idle ones.
//
// Prefetching after the acquires is deliberate: Acquire counts a block
// that is on its way as a hit, so a prefetch of the step's own zoom set
// just before its acquires would make every acquire a hit and the hit rate
// meaningless. Here the hit rate says how well one step's routing predicts
// the next step's zoom within the device budget.
//
// The f32 layout makes the device path bit-exact with the host: the CPU
// device's kernel does reconstruct.ReconstructInto's float32 operations in
// its order (ReconstructBytes to f32 is the identity rounding), with the
// cos/sin tables reconstruct.RoPE computes, and SpanReader.ReconstructSpan,
// what the host path calls, rotates keys at the same positions
// (BasePosition 0 + the span's start + i). The CUDA kernel is written to the
// same contract (no FMA, same order; checked bit for bit against
// ReconstructBytes by the device check). So the zoomed spans and the logits
// are compared for exact equality, not within a tolerance.

// spanZoomer rebuilds the rows of a spanMethod's zoomed spans.
type spanZoomer interface {
	// zoom is called once per step and layer, before span, with the
	// layer's zoom set (the groups of other layers are empty) and the
	// pre-RoPE queries it was routed with, per group (nil when nothing
	// is zoomed at the budget).
	zoom(layer int, pos int64, z *reconstruct.ZoomSet, queries [][]float32) error
	// span returns span sp of (layer, head)'s rows, keys RoPE'd at their
	// positions. The rows stay valid until the next zoom.
	span(layer, head, sp int) (rowSet, error)
}

// zoom is nothing on the host: span reconstructs each span when asked.
func (s *spanStore) zoom(int, int64, *reconstruct.ZoomSet, [][]float32) error { return nil }

// DeviceZoomOptions configure the device zoom path.
type DeviceZoomOptions struct {
	// Device rebuilds the spans (nil: gpu.CPU()). The caller owns it.
	Device gpu.Device
	// ArenaShare is the prefetcher's device budget as a share of the
	// context's factor bytes (K and V of every factored span and (layer,
	// KV head)); 0: 0.5. It is raised to minArenaBlocks of the largest
	// block, what one batch needs with room to spare.
	ArenaShare float64
	// Lookahead is the spans per (layer, KV head) beyond the zoomed ones
	// prefetched for the coming steps, by routing score.
	Lookahead int
}

const (
	// zoomBatch is the blocks per kernel launch (and pinned at once).
	zoomBatch = 8
	// zoomReaders is the prefetcher's concurrent reads: one, so that a
	// prefetch loads in score order and which blocks it skips does not
	// depend on which reader is first. (The prefetcher breaks ties between
	// equal scores, such as a span's K and V, in SpanKey order when it
	// evicts, so a run repeats its hit rate.)
	zoomReaders = 1
	// minArenaBlocks of the largest block is the smallest arena: a batch
	// pinned, the block a reader loads, and first-fit fragmentation around
	// the pinned blocks (2*zoomBatch+1 blocks always leave one gap).
	minArenaBlocks = 2*zoomBatch + 1 + zoomReaders
)

// deviceZoom is a spanZoomer on a gpu.Device (see the comment above).
type deviceZoom struct {
	s         *spanStore
	rt        *store.Routing // the method's routing, for the lookahead's scores
	dev       gpu.Device
	ownDev    bool
	stream    gpu.Stream
	pf        *gpu.Prefetcher
	rc        *gpu.Reconstructor
	out       [2]gpu.Output   // the layer's K and V
	host      [2][]byte       // their rows copied back
	rows      [2][]float32    // and as float32
	zoomed    map[[2]int]bool // (head, span) zoomed at this layer: true rebuilt, false raw
	layer     int
	lookahead int
	arena     int
	stats     deviceZoomStats
}

// deviceZoomStats counts a deviceZoom's work.
type deviceZoomStats struct {
	Calls       int64 // zoom calls: decode steps x layers
	Blocks      int64 // factor blocks acquired and rebuilt (K and V count one each)
	FactorBytes int64 // their encoded bytes (what a zoom moves when nothing is resident)
	CopiedBack  int64 // rebuilt bytes copied device to host
	// RawSpans and RawBytes count the zoomed unfactored spans (raw zoom),
	// whose stored rows are read as stored, not rebuilt on the device,
	// and those rows' bytes (K and V, the rows not resident).
	RawSpans, RawBytes int64
}

// kinds are the chunk kinds of a span's two blocks, in out's order.
var kinds = [2]format.ChunkKind{format.ChunkK, format.ChunkV}

// newDeviceZoom prepares s's spans for zooming on opts.Device with rt's
// scores.
func newDeviceZoom(s *spanStore, rt *store.Routing, opts DeviceZoomOptions) (d *deviceZoom, err error) {
	meta := s.meta
	d = &deviceZoom{s: s, rt: rt, dev: opts.Device, zoomed: map[[2]int]bool{}, lookahead: opts.Lookahead}
	if d.dev == nil {
		d.dev, d.ownDev = gpu.CPU(), true
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.close())
		}
	}()
	total, largest := 0, 0
	for l := range meta.Layers {
		for h := range meta.KVHeads {
			for sp, info := range meta.Spans {
				if !info.Factored {
					continue
				}
				for _, k := range kinds {
					n, err := s.r.FactorSize(l, h, sp, k)
					if err != nil {
						return d, err
					}
					total += n
					largest = max(largest, n)
				}
			}
		}
	}
	share := cmp.Or(opts.ArenaShare, 0.5)
	d.arena = max(int(share*float64(total)), minArenaBlocks*(largest+gpu.ArenaAlign), gpu.ArenaAlign)
	if d.stream, err = d.dev.NewStream(); err != nil {
		return d, err
	}
	if d.pf, err = gpu.NewPrefetcher(d.dev, gpusource.New(s.r), gpu.PrefetchOptions{Budget: d.arena, Readers: zoomReaders}); err != nil {
		return d, err
	}
	if d.rc, err = gpu.NewReconstructor(d.dev, s.r.RoPE(), d.stream, gpu.ReconstructorOptions{BatchJobs: zoomBatch}); err != nil {
		return d, err
	}
	lay := gpu.Layout{Kind: gpu.LayoutHND, DType: format.DTypeF32, Heads: meta.KVHeads, HeadDim: s.hd, Tokens: meta.Tokens}
	if err := lay.Validate(); err != nil {
		return d, err
	}
	for i := range d.out {
		buf, err := d.dev.Alloc(lay.Bytes())
		if err != nil {
			return d, err
		}
		d.out[i] = gpu.Output{Layout: lay, Dst: buf}
		d.host[i] = make([]byte, lay.Bytes())
		d.rows[i] = make([]float32, lay.Bytes()/4)
	}
	return d, nil
}

func (d *deviceZoom) key(layer, head, sp int, k format.ChunkKind) gpu.SpanKey {
	return gpu.SpanKey{Context: [32]byte(d.s.r.ID()), Layer: int32(layer), Head: int32(head), Span: int32(sp), Kind: k}
}

// zoom rebuilds the layer's zoomed spans on the device, copies them back
// and prefetches for the coming steps.
func (d *deviceZoom) zoom(layer int, pos int64, z *reconstruct.ZoomSet, queries [][]float32) error {
	meta := d.s.meta
	clear(d.zoomed)
	d.layer = layer
	d.stats.Calls++
	var targets [2][]gpu.Target
	var reqs []gpu.Request
	for _, o := range z.Order {
		head := o.Group - layer*meta.KVHeads
		if head < 0 || head >= meta.KVHeads || o.Span < 0 || o.Span >= len(meta.Spans) {
			return fmt.Errorf("%w: quality: zoom of group %d span %d at layer %d", format.ErrInvalidArgument, o.Group, o.Span, layer)
		}
		if !meta.Spans[o.Span].Factored {
			// Raw zoom: the span's rows are stored, nothing to rebuild.
			d.zoomed[[2]int{head, o.Span}] = false
			d.stats.RawSpans++
			d.stats.RawBytes += d.rt.SpanBytes[o.Group][o.Span]
			continue
		}
		d.zoomed[[2]int{head, o.Span}] = true
		for i, k := range kinds {
			key := d.key(layer, head, o.Span, k)
			targets[i] = append(targets[i], gpu.Target{Key: key, Score: o.Score, Head: head,
				Token: meta.Spans[o.Span].Start, Rotate: k == format.ChunkK})
			reqs = append(reqs, gpu.Request{Key: key, Score: o.Score})
		}
	}
	ctx := context.Background()
	for i := range targets {
		if err := d.rebuild(ctx, d.out[i], targets[i]); err != nil {
			return fmt.Errorf("quality: device zoom, layer %d: %w", layer, err)
		}
	}
	if err := d.copyBack(targets); err != nil {
		return fmt.Errorf("quality: device zoom, layer %d: %w", layer, err)
	}
	next, err := d.candidates(layer, pos, z, queries)
	if err != nil {
		return err
	}
	if err := d.pf.Prefetch(ctx, append(reqs, next...)); err != nil {
		return fmt.Errorf("quality: device zoom, layer %d: %w", layer, err)
	}
	return nil
}

// rebuild acquires targets' blocks a batch at a time, launches the kernel
// into out and releases them after it on the stream.
func (d *deviceZoom) rebuild(ctx context.Context, out gpu.Output, targets []gpu.Target) error {
	for start := 0; start < len(targets); start += zoomBatch {
		batch := targets[start:min(start+zoomBatch, len(targets))]
		spans := make([]*gpu.Span, 0, len(batch))
		var err error
		for _, t := range batch {
			var sp *gpu.Span
			if sp, err = d.pf.Acquire(ctx, t.Key); err != nil {
				break
			}
			spans = append(spans, sp)
			d.stats.Blocks++
			d.stats.FactorBytes += int64(sp.Buffer.Len())
		}
		if err == nil {
			err = d.rc.Run(d.pf.Arena().Base(), out, batch, spans)
		}
		for _, sp := range spans {
			err = errors.Join(err, d.pf.Release(sp, d.stream))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// copyBack copies the rebuilt rows of targets to the host after the
// kernels (same stream) and waits for them.
func (d *deviceZoom) copyBack(targets [2][]gpu.Target) error {
	hd := d.s.hd
	type rng struct{ off, n int }
	var ranges [2][]rng
	for i, ts := range targets {
		for _, t := range ts {
			r := rng{off: (t.Head*d.s.meta.Tokens + t.Token) * hd * 4, n: d.s.meta.Spans[t.Key.Span].Len() * hd * 4}
			src, err := d.out[i].Dst.Sub(r.off, r.n)
			if err != nil {
				return err
			}
			if err := d.stream.CopyDtoH(d.host[i][r.off:r.off+r.n], src); err != nil {
				return err
			}
			ranges[i] = append(ranges[i], r)
			d.stats.CopiedBack += int64(r.n)
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		return err
	}
	for i, rs := range ranges {
		for _, r := range rs {
			if err := format.ToF32(d.rows[i][r.off/4:(r.off+r.n)/4], d.host[i][r.off:r.off+r.n], format.DTypeF32); err != nil {
				return err
			}
		}
	}
	return nil
}

// candidates are the prefetch requests beyond the zoom set: per KV head of
// the layer, the Lookahead factored spans of highest score (ties to the
// lower index) that were not zoomed, K and V.
func (d *deviceZoom) candidates(layer int, pos int64, z *reconstruct.ZoomSet, queries [][]float32) ([]gpu.Request, error) {
	if d.lookahead <= 0 || queries == nil {
		return nil, nil
	}
	meta := d.s.meta
	var reqs []gpu.Request
	for head := range meta.KVHeads {
		gi := layer*meta.KVHeads + head
		if len(queries[gi]) == 0 {
			continue
		}
		scores, err := d.rt.Score(gi, pos, queries[gi], nil)
		if err != nil {
			return nil, fmt.Errorf("quality: device zoom, layer %d: %w", layer, err)
		}
		var spans []int
		for sp, a := range scores {
			if !math.IsNaN(float64(a)) && !slices.Contains(z.Spans[gi], sp) {
				spans = append(spans, sp)
			}
		}
		slices.SortStableFunc(spans, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
		for _, sp := range spans[:min(d.lookahead, len(spans))] {
			for _, k := range kinds {
				reqs = append(reqs, gpu.Request{Key: d.key(layer, head, sp, k), Score: scores[sp]})
			}
		}
	}
	return reqs, nil
}

// span is a zoomed span's rows as copied back.
func (d *deviceZoom) span(layer, head, sp int) (rowSet, error) {
	rebuilt, ok := d.zoomed[[2]int{head, sp}]
	if layer != d.layer || !ok {
		return rowSet{}, fmt.Errorf("%w: quality: device zoom: span %d of (layer %d, head %d) not zoomed at this step", format.ErrInvalidArgument, sp, layer, head)
	}
	if !rebuilt {
		return d.s.span(layer, head, sp)
	}
	info, hd := d.s.meta.Spans[sp], d.s.hd
	lo, hi := (head*d.s.meta.Tokens+info.Start)*hd, (head*d.s.meta.Tokens+info.End)*hd
	return rowSet{k: d.rows[0][lo:hi:hi], v: d.rows[1][lo:hi:hi]}, nil
}

// prefetchStats is the prefetcher's counters.
func (d *deviceZoom) prefetchStats() gpu.Stats { return d.pf.Stats() }

// close waits for the device work and frees what newDeviceZoom made.
func (d *deviceZoom) close() error {
	var errs []error
	if d.rc != nil {
		errs = append(errs, d.rc.Close())
	}
	if d.pf != nil {
		errs = append(errs, d.pf.Close())
	}
	for _, o := range d.out {
		if o.Dst.Len() > 0 {
			errs = append(errs, d.dev.Free(o.Dst))
		}
	}
	if d.stream != nil {
		errs = append(errs, d.stream.Close())
	}
	if d.ownDev {
		errs = append(errs, d.dev.Close())
	}
	return errors.Join(errs...)
}

// zoomMethod is span memory at b rows and the spanMethod whose zoomer
// the device path replaces: span+heads (its retrieval heads' zoom) where
// lc.Retrieval is set, else span (span+sum with summaries).
func (lc *LongConfig) zoomMethod(s *spanStore, h []float32, cache *llama.Cache, b int, summaries bool) (method, *spanMethod, error) {
	if lc.Retrieval != nil {
		hs, err := lc.headMethod(MethodSpanHeads, s, h, cache, b, nil)
		if err != nil {
			return nil, nil, err
		}
		return hs, hs.bs.spanMethod, nil
	}
	sm := newSpanMethod(s, h, b, lc.Span.AnchorShare, summaries)
	return sm, sm, nil
}

// traceZoom records the zoom sets a spanMethod's zoomer is given: per
// call, the layer and its groups' span lists.
type traceZoom struct {
	spanZoomer
	kvHeads int
	calls   []zoomCall
}

type zoomCall struct {
	layer int
	spans [][]int
}

func (t *traceZoom) zoom(layer int, pos int64, z *reconstruct.ZoomSet, queries [][]float32) error {
	c := zoomCall{layer: layer}
	for _, s := range z.Spans[layer*t.kvHeads : (layer+1)*t.kvHeads] {
		c.spans = append(c.spans, slices.Clone(s))
	}
	t.calls = append(t.calls, c)
	return t.spanZoomer.zoom(layer, pos, z, queries)
}

// traced wraps sm's zoomer in a traceZoom.
func traced(sm *spanMethod) *traceZoom {
	t := &traceZoom{spanZoomer: sm.zoomer, kvHeads: sm.s.meta.KVHeads}
	sm.zoomer = t
	return t
}
