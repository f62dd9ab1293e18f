package quality

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// spanStore is a context's span memory written to an in-memory store and
// opened again: every factor and resident row the span methods use is read
// back through the store's SpanReader and routed by its Routing.
type spanStore struct {
	db         *store.DB
	r          *store.SpanReader
	rt         *store.Routing
	meta       *store.SpanMeta
	hd         int
	resK, resV [][]float32       // per layer, [KVHeads][resident][hd], post-RoPE at their positions
	recon      map[[3]int]rowSet // (layer, head, span) -> reconstructed rows
	size       store.SpanSize    // of the stored memory
	// rawZoom, with the store's size rule (Config.SizeRule), keeps the
	// rows of a span left unfactored off the GPU like a factored span's:
	// a zoom moves them exact from the stored resident rows (resAt: the
	// index of a token's row there). Without it they are resident on the
	// GPU, as the store's routing assumes.
	rawZoom bool
	// routeRaw, with rawZoom, has the routers score unfactored spans too
	// (Config.RouteRaw): routing returns them with Factored set.
	routeRaw bool
	resAt    map[int]int
	rowSize  int // bytes of one stored row, K or V, of one (layer, KV head)
}

// newSpanStore builds, stores and opens the span memory of a prefilled
// cache (at base position 0).
func newSpanStore(m *llama.Model, c *llama.Cache, h []float32, cfg *Config) (*spanStore, error) {
	db, err := store.Open("/sekv", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	s := &spanStore{db: db, hd: c.HeadDim, recon: map[[3]int]rowSet{}, rawZoom: cfg.SizeRule, routeRaw: cfg.SizeRule && cfg.RouteRaw}
	if err := s.build(m, c, h, cfg); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// rowSpec is the model spec a memory of cfg is stored under: its rows'
// dtype (Config.RowDType, f32 when unset) and cfg.Name as the weights id.
// A model's routers and other artifacts are bound to its fingerprint.
func rowSpec(m *llama.Model, cfg *Config) *format.ModelSpec {
	dt := cfg.RowDType
	if dt == 0 {
		dt = format.DTypeF32
	}
	return m.Spec(dt, cfg.Name)
}

func (s *spanStore) build(m *llama.Model, c *llama.Cache, h []float32, cfg *Config) error {
	spec := rowSpec(m, cfg)
	dt := spec.DType
	in := &store.SpanInput{Model: spec, Surprisal: h}
	for _, kv := range c.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	if cfg.HeadRank != nil {
		data, meta, err := store.EncodeHeadValues(cfg.HeadRank, spec.Layers, spec.KVHeads)
		if err != nil {
			return err
		}
		if err := s.db.PutArtifact(spec.Fingerprint(), store.ArtifactRank, data, meta); err != nil {
			return err
		}
	}
	mem, err := s.db.BuildSpanMemory(in, &store.SpanOptions{Segment: cfg.Segment, FactorDType: cfg.FactorDType, FactorAll: !cfg.SizeRule, KeepResidentSpans: cfg.SizeRule && cfg.RawSpans,
		ResidentTail: int(math.Ceil(cfg.ResidentTail * float64(len(h)))),
		SVD:          reconstruct.SVDOptions{Energy: cfg.Energy, MaxRank: cfg.MaxRank}})
	if err != nil {
		return err
	}
	if s.size, err = mem.Size(); err != nil {
		return err
	}
	if _, err := s.db.PutSpanMemory(context.Background(), "quality", "context", mem); err != nil {
		return err
	}
	if s.r, err = s.db.OpenSpanMemory(context.Background(), "quality", spec.Fingerprint(), "context"); err != nil {
		return err
	}
	s.meta = s.r.Meta()
	s.rowSize = s.hd * dt.Size()
	s.resAt = make(map[int]int, len(s.meta.Resident))
	for i, t := range s.meta.Resident {
		s.resAt[t] = i
	}
	if cfg.SetTau {
		tau := make([]float32, spec.Layers*spec.KVHeads)
		for i := range tau {
			tau[i] = cfg.Tau
		}
		data, meta, err := store.EncodeHeadValues(tau, spec.Layers, spec.KVHeads)
		if err != nil {
			return err
		}
		if err := s.db.PutArtifact(spec.Fingerprint(), store.ArtifactTau, data, meta); err != nil {
			return err
		}
	}
	if s.rt, err = s.r.Routing(); err != nil {
		return err
	}
	for l := range spec.Layers {
		kb, vb, err := s.r.Resident(l)
		if err != nil {
			return err
		}
		k, v := make([]float32, len(kb)/dt.Size()), make([]float32, len(vb)/dt.Size())
		if err := format.ToF32(k, kb, dt); err != nil {
			return err
		}
		if err := format.ToF32(v, vb, dt); err != nil {
			return err
		}
		s.resK, s.resV = append(s.resK, k), append(s.resV, v)
	}
	return nil
}

func (s *spanStore) close() {
	if s.r != nil {
		s.r.Release()
	}
	_ = s.db.Close()
}

// span reconstructs (once) span sp of (layer, head) from its stored factors,
// keys RoPE'd at their positions; an unfactored span's rows are its stored
// resident rows.
func (s *spanStore) span(layer, head, sp int) (rowSet, error) {
	key := [3]int{layer, head, sp}
	if rs, ok := s.recon[key]; ok {
		return rs, nil
	}
	info := s.meta.Spans[sp]
	n, hd := info.Len(), s.hd
	rs := rowSet{k: make([]float32, n*hd), v: make([]float32, n*hd)}
	if info.Factored {
		if err := s.r.ReconstructSpan(layer, head, sp, 0, rs.k, rs.v); err != nil {
			return rowSet{}, err
		}
		s.recon[key] = rs
		return rs, nil
	}
	for t := info.Start; t < info.End; t++ {
		k, v, ok := s.residentRow(layer, head, t)
		if !ok {
			return rowSet{}, fmt.Errorf("%w: quality: token %d of unfactored span %d has no stored row", format.ErrCorruption, t, sp)
		}
		copy(rs.k[(t-info.Start)*hd:], k)
		copy(rs.v[(t-info.Start)*hd:], v)
	}
	s.recon[key] = rs
	return rs, nil
}

// residentRow is token t's stored resident K and V rows of (layer, head),
// post-RoPE at its position; ok is false where t has none.
func (s *spanStore) residentRow(layer, head, t int) (k, v []float32, ok bool) {
	i, ok := s.resAt[t]
	if !ok {
		return nil, nil, false
	}
	hd, nr := s.hd, len(s.meta.Resident)
	at := (head*nr + i) * hd
	return s.resK[layer][at : at+hd], s.resV[layer][at : at+hd], true
}

// keepRows is the method attending, per (layer, KV head), over the given
// context tokens as the stored memory holds them: a resident row as
// stored (in the model's dtype), any other reconstructed from its span's
// factors. It is keepRows of the prefilled cache for a method whose rows
// the memory serves, such as span+heads' streaming windows.
func (s *spanStore) keepRows(tokens []int) (*fixedRows, error) {
	hd := s.hd
	f := &fixedRows{sets: make([][]rowSet, s.meta.Layers)}
	for l := range f.sets {
		f.sets[l] = make([]rowSet, s.meta.KVHeads)
		for g := range f.sets[l] {
			rs := rowSet{k: make([]float32, 0, len(tokens)*hd), v: make([]float32, 0, len(tokens)*hd)}
			for _, t := range tokens {
				if k, v, ok := s.residentRow(l, g, t); ok {
					rs.k, rs.v = append(rs.k, k...), append(rs.v, v...)
					continue
				}
				sp := spanOf(s.meta, t)
				if sp >= len(s.meta.Spans) || !s.meta.Spans[sp].Factored {
					return nil, fmt.Errorf("%w: quality: token %d has neither a stored row nor factors", format.ErrCorruption, t)
				}
				span, err := s.span(l, g, sp)
				if err != nil {
					return nil, err
				}
				j := t - s.meta.Spans[sp].Start
				rs.k = append(rs.k, span.k[j*hd:(j+1)*hd]...)
				rs.v = append(rs.v, span.v[j*hd:(j+1)*hd]...)
			}
			f.sets[l][g] = rs
		}
	}
	return f, nil
}

// routing is rt as s's methods route by it: with routeRaw, a copy whose
// every span is scored (Factored set), the unfactored ones by their
// summary keys; rt itself otherwise.
func (s *spanStore) routing(rt *store.Routing) *store.Routing {
	if !s.routeRaw {
		return rt
	}
	c := *rt
	c.Factored = make([]bool, len(rt.Factored))
	for i := range c.Factored {
		c.Factored[i] = true
	}
	return &c
}

// zoomable reports whether span sp's rows not resident at a budget can be
// zoomed in: a factored span's always, an unfactored one's with rawZoom.
func (s *spanStore) zoomable(sp int) bool { return s.meta.Spans[sp].Factored || s.rawZoom }

// spanMethod is span memory at one budget.
type spanMethod struct {
	s         *spanStore
	rt        store.Routing // s.rt with this budget's zoom costs
	summaries bool
	resident  []bool // per context token: on the GPU at this budget
	resIdx    []int  // indices into Meta().Resident of the resident rows kept
	fixedRows float64
	zoom      int64 // zoom rows per layer, shared by its KV heads; 0 = none
	over      bool  // resident rows and summaries alone exceed the budget
	// heads, when set, are the (layer, KV head)s this memory serves (the
	// others get no rows, are not counted and never zoom): MethodSpanHeads'
	// retrieval heads.
	heads []bool
	stats spanStats
	// zoomer rebuilds the zoomed spans' rows: s itself on the host, or a
	// gpu.Device (deviceZoom, gpuzoom.go).
	zoomer spanZoomer
}

type spanStats struct {
	steps, rows float64 // group-steps and the rows they used
	bytes       float64 // factor bytes zoomed in, all groups
	spans       float64 // spans zoomed in, all groups
	maxRows     float64 // most rows per KV head of one layer at one step
}

// newSpanMethod sizes span memory to b rows per (layer, KV head).
func newSpanMethod(s *spanStore, h []float32, b int, share float64, summaries bool) *spanMethod {
	meta := s.meta
	sm := &spanMethod{s: s, zoomer: s, rt: *s.routing(s.rt), summaries: summaries, resident: make([]bool, meta.Tokens)}
	keep := keptAnchors(meta, h, int(share*float64(b)))
	for i, t := range meta.Resident {
		if keep[t] || !s.zoomable(spanOf(meta, t)) {
			sm.resident[t] = true
			sm.resIdx = append(sm.resIdx, i)
		}
	}
	sm.countSpanTokens()
	factored := 0
	for _, info := range meta.Spans {
		if info.Factored {
			factored++
		}
	}
	sm.fixedRows = float64(len(sm.resIdx))
	if summaries {
		sm.fixedRows += float64(factored) * float64(2*s.hd+meta.ProjDim) / float64(2*s.hd)
	}
	left := float64(b) - sm.fixedRows
	sm.over = left < 0
	if left >= 1 {
		sm.zoom = int64(math.Floor(left)) * int64(meta.KVHeads)
	}
	return sm
}

// countSpanTokens sets sm.rt.SpanTokens, per span the rows a zoom adds
// (its zoomable rows not resident), and, with raw zoom, the bytes an
// unfactored span's zoom moves (its rows, K and V, in the stored dtype).
func (sm *spanMethod) countSpanTokens() {
	meta := sm.s.meta
	sm.rt.SpanTokens = make([]int, len(meta.Spans))
	for sp, info := range meta.Spans {
		if !sm.s.zoomable(sp) {
			continue
		}
		for t := info.Start; t < info.End; t++ {
			if !sm.resident[t] {
				sm.rt.SpanTokens[sp]++
			}
		}
	}
	if !sm.s.rawZoom {
		return
	}
	bytes := make([][]int64, len(sm.rt.SpanBytes))
	for g, row := range sm.rt.SpanBytes {
		bytes[g] = slices.Clone(row)
		for sp, info := range meta.Spans {
			if !info.Factored {
				bytes[g][sp] = int64(2 * sm.rt.SpanTokens[sp] * sm.s.rowSize)
			}
		}
	}
	sm.rt.SpanBytes = bytes
}

// keptAnchors marks the anchors resident within limit rows: the sinks
// first, then by descending surprisal (NaN first), ties to the earlier.
func keptAnchors(meta *store.SpanMeta, h []float32, limit int) []bool {
	a := append([]int(nil), meta.Anchors...)
	prio := func(t int) float64 {
		switch {
		case t < sinks, math.IsNaN(float64(h[t])):
			return math.Inf(1)
		}
		return float64(h[t])
	}
	slices.SortStableFunc(a, func(x, y int) int { return cmp.Compare(prio(y), prio(x)) })
	keep := make([]bool, meta.Tokens)
	for _, t := range a[:min(max(limit, 0), len(a))] {
		keep[t] = true
	}
	return keep
}

func spanOf(meta *store.SpanMeta, t int) int {
	i, _ := slices.BinarySearchFunc(meta.Spans, t, func(s format.Span, t int) int {
		switch {
		case s.End <= t:
			return -1
		case s.Start > t:
			return 1
		}
		return 0
	})
	return i
}

// rows routes a's layer with its queries, zooms within the budget and
// returns each KV head's rows.
func (sm *spanMethod) rows(a *llama.StepAttention) ([]rowSet, error) {
	meta, hd := sm.s.meta, sm.s.hd
	z := &reconstruct.ZoomSet{Spans: make([][]int, meta.Layers*meta.KVHeads)}
	var queries [][]float32
	if sm.zoom > 0 {
		queries = make([][]float32, meta.Layers*meta.KVHeads)
		per := len(a.QPre) / hd / meta.KVHeads
		for g := range meta.KVHeads {
			queries[a.Layer*meta.KVHeads+g] = a.QPre[g*per*hd : (g+1)*per*hd]
		}
		var err error
		if z, err = sm.rt.Zoom(a.Pos, queries, reconstruct.Budget{Tokens: sm.zoom, Fill: true}); err != nil {
			return nil, err
		}
	}
	return sm.zoomedRows(a.Layer, a.Pos, z, queries)
}

// groupRows is (layer, g)'s resident rows, zoomed spans' rows not resident,
// and, with summaries, one entry per factored span not zoomed.
func (sm *spanMethod) groupRows(layer, g int, zoomed []int) (rowSet, error) {
	meta, hd := sm.s.meta, sm.s.hd
	nr := len(meta.Resident)
	var rs rowSet
	for _, i := range sm.resIdx {
		rs.k = append(rs.k, sm.s.resK[layer][(g*nr+i)*hd:(g*nr+i+1)*hd]...)
		rs.v = append(rs.v, sm.s.resV[layer][(g*nr+i)*hd:(g*nr+i+1)*hd]...)
	}
	rows := len(sm.resIdx)
	isZoomed := make([]bool, len(meta.Spans))
	for _, sp := range zoomed {
		isZoomed[sp] = true
		rec, err := sm.zoomer.span(layer, g, sp)
		if err != nil {
			return rowSet{}, err
		}
		start := meta.Spans[sp].Start
		for t := start; t < meta.Spans[sp].End; t++ {
			if !sm.resident[t] {
				rs.k = append(rs.k, rec.k[(t-start)*hd:(t-start+1)*hd]...)
				rs.v = append(rs.v, rec.v[(t-start)*hd:(t-start+1)*hd]...)
				rows++
			}
		}
	}
	if !sm.summaries {
		return rs, nil
	}
	rs.bias = make([]float32, rows)
	return sm.summaryRows(rs, layer, g, isZoomed)
}

// summaryRows appends one entry per factored span not zoomed: the summary
// key RoPE'd at the mean position of the span's tokens not resident, its
// value, and a bias of ln(their count).
func (sm *spanMethod) summaryRows(rs rowSet, layer, g int, zoomed []bool) (rowSet, error) {
	sums, err := sm.s.r.Summaries(layer, g)
	if err != nil {
		return rowSet{}, err
	}
	for sp, info := range sm.s.meta.Spans {
		if !info.Factored || zoomed[sp] {
			continue
		}
		var n, pos float64
		for t := info.Start; t < info.End; t++ {
			if !sm.resident[t] {
				n++
				pos += float64(t)
			}
		}
		if n == 0 {
			continue
		}
		k := append([]float32(nil), sums[sp].Key...)
		sm.s.r.RoPE().Apply(k, int64(math.Round(pos/n)))
		rs.k = append(rs.k, k...)
		rs.v = append(rs.v, sums[sp].Value...)
		rs.bias = append(rs.bias, float32(math.Log(n)))
	}
	return rs, nil
}

// usage is the mean rows per group-step and bytes per step.
func (sm *spanMethod) usage(steps int) (rows, bytes float64) {
	if sm.stats.steps == 0 {
		return sm.fixedRows, 0
	}
	return sm.stats.rows / sm.stats.steps, sm.stats.bytes / float64(steps)
}

func (sm *spanMethod) String() string {
	return fmt.Sprintf("span(resident %d, zoom %d/layer, summaries %v)", len(sm.resIdx), sm.zoom, sm.summaries)
}
