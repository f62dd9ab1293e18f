package main

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// decoder is what a server keeps per long context while decoding from its
// span memory: the routing state and the resident rows (on the GPU in a
// real server), the spans reconstructed so far, and the decoded tokens'
// own keys and values.
type decoder struct {
	m          *llama.Model
	r          *store.SpanReader
	rt         *store.Routing
	resK, resV [][]float32 // per layer, [KVHeads][resident][head dim], keys post-RoPE at their positions
	budgetRows int         // GPU rows per (layer, KV head)
	zoomRows   int64       // zoom budget per layer, shared by its KV heads
	recon      map[[3]int][2][]float32
	recentK    [][][]float32 // [layer][kv head] decoded tokens' rows
	recentV    [][][]float32
	last       step
}

func newDecoder(m *llama.Model, r *store.SpanReader, budget float64) (*decoder, error) {
	meta := r.Meta()
	rt, err := r.Routing()
	if err != nil {
		return nil, err
	}
	d := &decoder{m: m, r: r, rt: rt, recon: map[[3]int][2][]float32{},
		budgetRows: int(budget * float64(meta.Tokens))}
	// The resident rows always stay on the GPU; what is left of each
	// group's rows goes to zoomed spans, pooled over a layer's KV heads.
	d.zoomRows = int64(max(d.budgetRows-len(meta.Resident), 0) * meta.KVHeads)
	for l := range meta.Layers {
		kb, vb, err := r.Resident(l)
		if err != nil {
			return nil, err
		}
		// Stored keys are at local positions; this context sits at its
		// original base, so the shift is by BasePosition (0 here).
		k, v := make([]float32, len(kb)/4), make([]float32, len(vb)/4)
		if err := format.ToF32(k, kb, meta.ResidentDType); err != nil {
			return nil, err
		}
		if err := format.ToF32(v, vb, meta.ResidentDType); err != nil {
			return nil, err
		}
		if err := reconstruct.ShiftF32(k, k, r.RoPE(), meta.KVHeads, len(meta.Resident), meta.BasePosition); err != nil {
			return nil, err
		}
		d.resK, d.resV = append(d.resK, k), append(d.resV, v)
	}
	d.recentK, d.recentV = make([][][]float32, meta.Layers), make([][][]float32, meta.Layers)
	for l := range d.recentK {
		d.recentK[l], d.recentV[l] = make([][]float32, meta.KVHeads), make([][]float32, meta.KVHeads)
	}
	return d, nil
}

// step decodes one token and returns its next-token logits.
func (d *decoder) step(tok int, pos int64) ([]float32, error) {
	d.last = step{}
	logits, err := d.m.Step(tok, pos, d.attend)
	groups := float64(d.m.Layers * d.m.KVHeads)
	d.last.Rows /= groups
	return logits, err
}

// attend routes one layer's queries, zooms in spans and attends.
func (d *decoder) attend(a *llama.StepAttention) error {
	meta, hd := d.r.Meta(), d.m.HeadDim()
	perGroup := d.m.Heads / d.m.KVHeads
	queries := make([][]float32, meta.Layers*meta.KVHeads)
	for g := range meta.KVHeads {
		queries[a.Layer*meta.KVHeads+g] = a.QPre[g*perGroup*hd : (g+1)*perGroup*hd]
	}
	zoom := &reconstruct.ZoomSet{Spans: make([][]int, len(queries))}
	if d.zoomRows > 0 {
		var err error
		if zoom, err = d.rt.Zoom(a.Pos, queries, reconstruct.Budget{Tokens: d.zoomRows, Fill: true}); err != nil {
			return err
		}
	}
	d.last.Bytes += zoom.Bytes
	for g := range meta.KVHeads {
		keys, vals, err := d.rows(a.Layer, g, zoom.Spans[a.Layer*meta.KVHeads+g])
		if err != nil {
			return err
		}
		d.last.Rows += float64(len(keys) / hd)
		d.recentK[a.Layer][g] = append(d.recentK[a.Layer][g], a.K[g*hd:(g+1)*hd]...)
		d.recentV[a.Layer][g] = append(d.recentV[a.Layer][g], a.V[g*hd:(g+1)*hd]...)
		keys = append(keys, d.recentK[a.Layer][g]...)
		vals = append(vals, d.recentV[a.Layer][g]...)
		for h := g * perGroup; h < (g+1)*perGroup; h++ {
			llama.Attend(a.Out[h*hd:(h+1)*hd], a.Q[h*hd:(h+1)*hd], keys, vals, nil)
		}
	}
	return nil
}

// rows is group (layer, g)'s context rows: the resident ones, then the
// zoomed spans' reconstructed rows that are not resident.
func (d *decoder) rows(layer, g int, spans []int) (keys, vals []float32, err error) {
	meta, hd := d.r.Meta(), d.m.HeadDim()
	nr := len(meta.Resident)
	keys = append(keys, d.resK[layer][g*nr*hd:(g+1)*nr*hd]...)
	vals = append(vals, d.resV[layer][g*nr*hd:(g+1)*nr*hd]...)
	resident := map[int]bool{}
	for _, t := range meta.Resident {
		resident[t] = true
	}
	for _, s := range spans {
		d.last.Zoomed++
		kv, err := d.span(layer, g, s)
		if err != nil {
			return nil, nil, err
		}
		sp := meta.Spans[s]
		for t := sp.Start; t < sp.End; t++ {
			if !resident[t] {
				keys = append(keys, kv[0][(t-sp.Start)*hd:(t-sp.Start+1)*hd]...)
				vals = append(vals, kv[1][(t-sp.Start)*hd:(t-sp.Start+1)*hd]...)
			}
		}
	}
	return keys, vals, nil
}

// span reconstructs a span from its stored factors once: keys with RoPE at
// the span's positions in the same pass. A server would stream the factors
// to the GPU (gpusource.New(r) and gpu.Prefetcher) and reconstruct there.
func (d *decoder) span(layer, g, s int) ([2][]float32, error) {
	key := [3]int{layer, g, s}
	if kv, ok := d.recon[key]; ok {
		return kv, nil
	}
	n := d.r.Meta().Spans[s].Len() * d.m.HeadDim()
	kv := [2][]float32{make([]float32, n), make([]float32, n)}
	if err := d.r.ReconstructSpan(layer, g, s, d.r.Meta().BasePosition, kv[0], kv[1]); err != nil {
		return kv, fmt.Errorf("span %d of layer %d head %d: %w", s, layer, g, err)
	}
	d.recon[key] = kv
	return kv, nil
}
