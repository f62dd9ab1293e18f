package spanmem

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// Input is a long context's KV cache as Build takes it.
type Input struct {
	Model *format.ModelSpec
	// K and V hold, per layer, [KVHeads][tokens][HeadDim] float32 rows;
	// keys post-RoPE, row t rotated for position BasePosition+t (what the
	// model attended with).
	K, V         [][]float32
	BasePosition int64
	// Surprisal is H_t = -ln p(x_t | x_<t) per token, NaN where unknown
	// (the first token); see segment.Split for non-finite values.
	Surprisal []float32
}

// Options configure Build. The zero value is SeKV's defaults.
type Options struct {
	Segment segment.Options
	// ProjectionDim is d' of a W fitted here (no W artifact stored); 0
	// means segment.DefaultProjectionDim; clipped to the head dim.
	ProjectionDim int
	// SVD bounds the factors: MaxRank (r_max, default 32) and Energy
	// (default 0.99) choose each span's rank unless the model has an
	// ArtifactRank, whose per (layer, head) rank then applies, or else an
	// ArtifactRankGate, whose gates then choose it. Rank is ignored; Seed
	// is mixed with (layer, head, span, K|V).
	SVD reconstruct.SVDOptions
	// FactorDType is the storage dtype of factors; 0 means
	// DefaultFactorDType.
	FactorDType format.DType
	// FactorAll keeps the factors of every span the segmentation factors,
	// even where they take more room than its rows in bf16 (see settle),
	// leaves the spans as the segmentation cut them, and builds a memory
	// larger than its rows rather than refusing it (ErrNotSmaller): for
	// measurements of factors on models whose rows do not compress.
	FactorAll bool
	// KeepResidentSpans leaves resident spans as the segmentation cut
	// them, each with its own records, rather than merging each run of
	// them into one (merge): for a reader that keeps unfactored spans off
	// the GPU too and moves their stored rows in by the span, as it zooms
	// factored ones. The size rule counts each one's records.
	KeepResidentSpans bool
	// ResidentTail, when above 0, keeps the rows of the spans that hold
	// the context's last ResidentTail tokens (never factored): for a
	// reader that keeps a window of the most recent rows on some heads,
	// which then reads them exact. The size rule counts them as any
	// resident span. Negative is invalid.
	ResidentTail int
}

// DefaultFactorDType is the factors' dtype when Options leave it 0: f16,
// whose 11-bit significand holds U's and Vt's elements (all within
// [-1, 1]) eight times finer than bf16's 8 bits. A span whose singular
// values f16 cannot hold (above 65504) keeps its rows (see settle).
const DefaultFactorDType = format.DTypeF16

// Build builds the span memory of a context from its KV cache, reading
// the model's SeKV artifacts from art: keys are un-rotated at their
// positions (reconstruct.Unapply), the context is segmented by surprisal
// (segment.Split), every span is summarised per (layer, KV head) and its
// summary key projected by W, and each factored span's pre-RoPE keys and
// values get truncated SVD factors. Unless opts.FactorAll, a span keeps
// its factors only where that makes the memory smaller and they take less
// room than the span's rows in bf16 (settle), consecutive resident spans
// are merged into one (merge; not with opts.KeepResidentSpans), and a
// memory that would still take more room once stored than the context's
// rows in the model's dtype (Size: Stored against Raw) is refused with
// ErrNotSmaller.
//
// W is the trained ArtifactRouterW when stored, else a default
// ArtifactRouterWPCA stored earlier, else it is fitted here by PCA of this
// context's pre-RoPE keys per (layer, KV head) and carried in the result
// (ProjectionRef.Fitted) for the store to keep, so that every later memory
// of the model routes with the same W. It is deterministic: the same
// input, options and artifacts give the same memory. in's slices are only
// read. Errors wrap ErrInvalidArgument, but for ErrNotSmaller.
func Build(in *Input, opts *Options, art Artifacts) (*Memory, error) {
	b, err := prepare(in, opts, art)
	if err != nil {
		return nil, err
	}
	if !b.opts.FactorAll {
		if err := b.fits(); err != nil {
			return nil, err
		}
	}
	return b.m, nil
}

// prepare is Build but for its last step, the refusal of a memory larger
// than its rows.
func prepare(in *Input, opts *Options, art Artifacts) (*build, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := in.Check(); err != nil {
		return nil, err
	}
	b, err := newBuild(in, &o)
	if err != nil {
		return nil, err
	}
	if err := b.projection(art, o.ProjectionDim); err != nil {
		return nil, err
	}
	if b.ranks, err = art.HeadValues(ArtifactRank); err != nil {
		return nil, err
	}
	if b.gate, err = rankGate(art); err != nil {
		return nil, err
	}
	if err := b.heads(); err != nil {
		return nil, err
	}
	if !b.opts.FactorAll {
		if err := b.settle(); err != nil {
			return nil, err
		}
	}
	if err := b.resident(); err != nil {
		return nil, err
	}
	return b, nil
}

// Check validates an Input. Errors wrap ErrInvalidArgument.
func (in *Input) Check() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: span input: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	if in.Model == nil {
		return bad("no model spec")
	}
	if err := in.Model.Validate(); err != nil {
		return fmt.Errorf("span input: %w", err)
	}
	m, n := in.Model, len(in.Surprisal)
	switch {
	case n == 0 || uint64(n) > math.MaxUint32:
		return bad("%d tokens", n)
	case in.BasePosition < 0 || in.BasePosition > math.MaxInt64-int64(n):
		return bad("base position %d", in.BasePosition)
	case len(in.K) != m.Layers || len(in.V) != m.Layers:
		return bad("%d K and %d V layers, model has %d", len(in.K), len(in.V), m.Layers)
	}
	want := m.KVHeads * n * m.HeadDim
	for l := range m.Layers {
		if len(in.K[l]) != want || len(in.V[l]) != want {
			return bad("layer %d: %d K and %d V floats, want %d ([%d][%d][%d])", l, len(in.K[l]), len(in.V[l]), want, m.KVHeads, n, m.HeadDim)
		}
	}
	return nil
}

// build is the state of one Build.
type build struct {
	in    *Input
	opts  *Options
	rope  *reconstruct.RoPE
	m     *Memory
	pre   [][]float32 // per layer, pre-RoPE keys [KVHeads][tokens][HeadDim]
	projs []*segment.Projection
	ranks []float32 // per group, or nil
	gate  *RankGate // ArtifactRankGate, or nil
}

func newBuild(in *Input, o *Options) (*build, error) {
	spec := in.Model
	rope, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		return nil, err
	}
	seg, err := segment.Split(in.Surprisal, o.Segment)
	if err != nil {
		return nil, err
	}
	if o.FactorDType == 0 {
		o.FactorDType = DefaultFactorDType
	}
	if !o.FactorDType.Float() {
		return nil, fmt.Errorf("%w: span options: factor dtype %v", ErrInvalidArgument, o.FactorDType)
	}
	if o.ResidentTail < 0 {
		return nil, fmt.Errorf("%w: span options: resident tail of %d tokens", ErrInvalidArgument, o.ResidentTail)
	}
	for i, sp := range seg.Spans {
		if sp.End > len(in.Surprisal)-o.ResidentTail {
			seg.Spans[i].Factored = false
		}
	}
	b := &build{in: in, opts: o, rope: rope, m: &Memory{
		Model: *spec, Tokens: len(in.Surprisal), BasePosition: in.BasePosition, Segmentation: seg,
		Resident: residentRows(seg), FactorDType: o.FactorDType,
	}}
	b.pre = make([][]float32, spec.Layers)
	for l := range b.pre {
		b.pre[l] = b.unrotate(in.K[l])
	}
	return b, nil
}

// residentRows is the anchors and every token of an unfactored span.
func residentRows(seg *segment.Segmentation) []int {
	rows := append([]int(nil), seg.Anchors...)
	for _, s := range seg.Spans {
		if !s.Factored {
			for t := s.Start; t < s.End; t++ {
				rows = append(rows, t)
			}
		}
	}
	slices.Sort(rows)
	return slices.Compact(rows)
}

// unrotate returns keys with RoPE undone at each row's position.
func (b *build) unrotate(k []float32) []float32 {
	hd, n := b.in.Model.HeadDim, len(b.in.Surprisal)
	out := append([]float32(nil), k...)
	for r := 0; r < len(out)/hd; r++ {
		reconstruct.Unapply(b.rope, out[r*hd:(r+1)*hd], b.in.BasePosition+int64(r%n))
	}
	return out
}

// rows is [start, end) of head h of a layer's [KVHeads][tokens][HeadDim].
func (b *build) rows(x []float32, h, start, end int) []float32 {
	hd, n := b.in.Model.HeadDim, len(b.in.Surprisal)
	return x[(h*n+start)*hd : (h*n+end)*hd]
}

// projection picks W: trained, stored default, or fitted here.
func (b *build) projection(art Artifacts, dim int) error {
	spec := b.in.Model
	for _, name := range []string{ArtifactRouterW, ArtifactRouterWPCA} {
		a, ok, err := art.Artifact(name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if b.projs, err = DecodeProjections(a.Data, a.Meta, spec.Layers, spec.KVHeads, spec.HeadDim); err != nil {
			return fmt.Errorf("artifact %q: %w", name, err)
		}
		b.m.Projection = ProjectionRef{Name: name, Hash: a.Hash, Dim: b.projs[0].Dim}
		return nil
	}
	return b.fitProjection(dim)
}

// fitProjection fits W by PCA of each (layer, KV head)'s pre-RoPE keys.
func (b *build) fitProjection(dim int) error {
	spec := b.in.Model
	b.projs = make([]*segment.Projection, spec.Layers*spec.KVHeads)
	for g := range b.projs {
		l, h := g/spec.KVHeads, g%spec.KVHeads
		p, err := segment.FitPCA(b.rows(b.pre[l], h, 0, len(b.in.Surprisal)), spec.HeadDim, dim)
		if err != nil {
			return fmt.Errorf("fit W of layer %d head %d: %w", l, h, err)
		}
		b.projs[g] = p
	}
	data, meta, err := EncodeProjections(b.projs, spec.Layers, spec.KVHeads)
	if err != nil {
		return err
	}
	b.m.Projection = ProjectionRef{Name: ArtifactRouterWPCA, Hash: blake3.Sum256(data), Dim: b.projs[0].Dim,
		Fitted: data, FittedMeta: meta}
	return nil
}

// heads summarises and factors every (layer, KV head), on several cores.
func (b *build) heads() error {
	spec := b.in.Model
	groups := spec.Layers * spec.KVHeads
	b.m.Heads = make([]Head, groups)
	errs := make([]error, groups)
	next := make(chan int, groups)
	for g := range groups {
		next <- g
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), groups) {
		wg.Go(func() {
			for g := range next {
				errs[g] = b.head(g)
			}
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			return fmt.Errorf("span memory: layer %d head %d: %w", g/spec.KVHeads, g%spec.KVHeads, err)
		}
	}
	return nil
}

// head builds group g: summaries of all spans, factors of factored ones.
func (b *build) head(g int) error {
	spec := b.in.Model
	l, h := g/spec.KVHeads, g%spec.KVHeads
	n := len(b.in.Surprisal)
	spans := b.m.Segmentation.Spans
	sums, err := segment.SummarizeSpans(b.rows(b.pre[l], h, 0, n), b.rows(b.in.V[l], h, 0, n), spec.HeadDim,
		b.in.Surprisal, spans, b.projs[g])
	if err != nil {
		return err
	}
	out := Head{Summaries: sums, K: make([]*reconstruct.Factors, len(spans)), V: make([]*reconstruct.Factors, len(spans))}
	for s, sp := range spans {
		if !sp.Factored {
			continue
		}
		o := b.svdOptions(g, s)
		if out.K[s], err = b.factor(b.rows(b.pre[l], h, sp.Start, sp.End), sp.Len(), spec.HeadDim, o, l, false); err != nil {
			return fmt.Errorf("span %d keys: %w", s, err)
		}
		o.Seed ^= 0x9e3779b97f4a7c15
		if out.V[s], err = b.factor(b.rows(b.in.V[l], h, sp.Start, sp.End), sp.Len(), spec.HeadDim, o, l, true); err != nil {
			return fmt.Errorf("span %d values: %w", s, err)
		}
	}
	b.m.Heads[g] = out
	return nil
}

// settle chooses which spans keep their factors, so that the memory takes
// as little room as it can, and makes the others resident: every stored
// byte a choice adds is counted against it. A factored span costs its
// factor blocks (per (layer, KV head) and K|V, a factor encoding in the
// factor dtype padded to the next block, format.ChunkAlignment), its
// anchors' rows (stored resident besides them, in the model's dtype, with
// their resident-row index entries) and its records: its entry and summary
// in every head record and its entry in the root record. A resident span
// costs its rows and their index entries; consecutive resident spans are
// then merged into one (merge), so that a run of them costs one span's
// records (with KeepResidentSpans each keeps its own, and costs them).
// The choice minimising the sum is found by dynamic programming over the
// spans (two states: the span before resident or factored).
//
// A span may keep its factors only where their blocks and its anchors'
// rows are smaller than its rows in bf16, whatever the model's dtype, so
// that factors never take more room than the KV they replace at 16 bits,
// and only where the factor dtype holds them (f16 past 65504 does not).
// The choice is per span, not per (span, layer, KV head): the root record
// marks a span factored or resident for every head, and resident rows are
// stored for all heads of a layer at once.
func (b *build) settle() error {
	spec, seg := b.in.Model, b.m.Segmentation
	anchor := make(map[int]bool, len(seg.Anchors))
	for _, t := range seg.Anchors {
		anchor[t] = true
	}
	// One token's rows, K and V, every layer and KV head.
	token := int64(2 * spec.Layers * spec.KVHeads * spec.HeadDim)
	row := token*int64(spec.DType.Size()) + 4 // a resident row and its index entry
	records := int64(len(b.m.Heads)*format.HeadMetaSpanLen(spec.HeadDim, b.m.Projection.Dim) + format.SpanMetaSpanLen)
	const never = math.MaxInt64 / 4
	// cost[s][f] is the least room spans 0..s take, span s factored (f 1)
	// or resident (f 0); from[s][f] the state of span s-1 it came from.
	cost, from := make([][2]int64, len(seg.Spans)), make([][2]int8, len(seg.Spans))
	for s, sp := range seg.Spans {
		prev := [2]int64{never, 0} // before span 0: a resident run starts anew
		if s > 0 {
			prev = cost[s-1]
		}
		rows := int64(sp.Len()) * row
		var join int64 // a resident span after a resident one: merged, no records of its own
		if b.opts.KeepResidentSpans {
			join = records
		}
		cost[s][0], from[s][0] = prev[0]+rows+join, 0
		if c := prev[1] + rows + records; c < cost[s][0] {
			cost[s][0], from[s][0] = c, 1
		}
		cost[s][1] = never
		f, ok := b.factorCost(s, sp, anchor, row)
		if !ok || f >= int64(sp.Len())*token*2 {
			continue
		}
		cost[s][1], from[s][1] = prev[1]+f+records, 1
		if prev[0] < prev[1] {
			cost[s][1], from[s][1] = prev[0]+f+records, 0
		}
	}
	state := int8(1)
	if last := cost[len(cost)-1]; last[0] <= last[1] {
		state = 0
	}
	for s := len(seg.Spans) - 1; s >= 0; s-- {
		if state == 0 && seg.Spans[s].Factored {
			seg.Spans[s].Factored = false
			for g := range b.m.Heads {
				b.m.Heads[g].K[s], b.m.Heads[g].V[s] = nil, nil
			}
		}
		state = from[s][state]
	}
	if !b.opts.KeepResidentSpans {
		if err := b.merge(); err != nil {
			return err
		}
	}
	b.m.Resident = residentRows(seg)
	return nil
}

// factorCost is the room span s takes factored, but for its records: its
// factor blocks and its anchors' resident rows (row bytes each); ok is
// false where it is not factored or the factor dtype cannot hold them.
func (b *build) factorCost(s int, sp segment.Span, anchor map[int]bool, row int64) (cost int64, ok bool) {
	if !sp.Factored {
		return 0, false
	}
	for t := sp.Start; t < sp.End; t++ {
		if anchor[t] {
			cost += row
		}
	}
	for _, h := range b.m.Heads {
		for _, f := range []*reconstruct.Factors{h.K[s], h.V[s]} {
			if !representable(f, b.opts.FactorDType) {
				return 0, false
			}
			cost += FactorBytes(f.Rows, f.Cols, f.Rank, b.opts.FactorDType)
		}
	}
	return cost, true
}

// merge makes each run of consecutive resident spans one span, summarised
// anew in every head: a resident span is never zoomed (its rows are on the
// GPU already), so one summary and one entry per record serve the run.
// Boundaries that no longer start a span are dropped.
func (b *build) merge() error {
	seg, spec := b.m.Segmentation, b.in.Model
	var spans []segment.Span
	var keep []int // per new span, the old span it is, or -1 for a merged run
	for s, sp := range seg.Spans {
		if n := len(spans); n > 0 && !sp.Factored && !spans[n-1].Factored {
			spans[n-1].End, keep[n-1] = sp.End, -1
			continue
		}
		spans, keep = append(spans, sp), append(keep, s)
	}
	if len(spans) == len(seg.Spans) {
		return nil
	}
	n := len(b.in.Surprisal)
	for g := range b.m.Heads {
		l, h, old := g/spec.KVHeads, g%spec.KVHeads, b.m.Heads[g]
		out := Head{Summaries: make([]segment.Summary, len(spans)), K: make([]*reconstruct.Factors, len(spans)),
			V: make([]*reconstruct.Factors, len(spans))}
		for i, s := range keep {
			if s >= 0 {
				out.Summaries[i], out.K[i], out.V[i] = old.Summaries[s], old.K[s], old.V[s]
				continue
			}
			sum, err := segment.SummarizeSpans(b.rows(b.pre[l], h, 0, n), b.rows(b.in.V[l], h, 0, n), spec.HeadDim,
				b.in.Surprisal, spans[i:i+1], b.projs[g])
			if err != nil {
				return fmt.Errorf("span memory: layer %d head %d: %w", l, h, err)
			}
			out.Summaries[i] = sum[0]
		}
		b.m.Heads[g] = out
	}
	starts := make(map[int]bool, len(spans))
	for _, sp := range spans {
		starts[sp.Start] = true
	}
	seg.Boundaries = slices.DeleteFunc(seg.Boundaries, func(t int) bool { return !starts[t] })
	seg.Spans = spans
	return nil
}

// fits refuses a memory that would take more room once stored (Size) than
// the rows it stands for in the model's dtype (Size.Raw; RawBF16 for a
// 16-bit model): ErrNotSmaller.
func (b *build) fits() error {
	stored, raw := b.m.storedBytes(), b.m.rawBytes()
	if stored > raw {
		return fmt.Errorf("%w: %d tokens take %d bytes as a span memory, %d as raw rows in %v",
			ErrNotSmaller, b.m.Tokens, stored, raw, b.m.Model.DType)
	}
	return nil
}

// FactorBytes is the room one factor block takes in an extent: the
// factor encoding of a rows x cols matrix of that rank in dt, padded to
// the next format.ChunkAlignment.
func FactorBytes(rows, cols, rank int, dt format.DType) int64 {
	n := int64(format.FactorHeaderSize) + int64(rows*rank+rank+rank*cols)*int64(dt.Size())
	return (n + format.ChunkAlignment - 1) / format.ChunkAlignment * format.ChunkAlignment
}

// maxF16 is the largest finite f16 value; larger float32 values round to
// infinity, but for those below 65520.
const maxF16 = 65504

// representable reports whether dt holds every element of f: all but f16
// hold every finite float32, and U's and Vt's elements are within [-1, 1].
func representable(f *reconstruct.Factors, dt format.DType) bool {
	if dt != format.DTypeF16 {
		return true
	}
	for _, v := range f.S {
		if v > maxF16 {
			return false
		}
	}
	return true
}

// svdOptions are the SVD options of span s of group g: the rank gate's
// rank when there is one, and a seed of its own.
func (b *build) svdOptions(g, s int) reconstruct.SVDOptions {
	o := b.opts.SVD
	o.EnsureDefaults()
	o.Rank = 0
	if b.ranks != nil && b.ranks[g] >= 1 {
		o.Rank = min(int(b.ranks[g]), o.MaxRank)
	}
	o.Seed += uint64(g)<<32 | uint64(s)
	return o
}

// resident gathers the resident rows of every layer: keys rotated to local
// positions (row t at position t) and both rounded to the model's dtype.
func (b *build) resident() error {
	spec, rows := b.in.Model, b.m.Resident
	hd, n, r := spec.HeadDim, len(b.in.Surprisal), len(rows)
	b.m.ResidentK, b.m.ResidentV = make([][]byte, spec.Layers), make([][]byte, spec.Layers)
	k, v := make([]float32, spec.KVHeads*r*hd), make([]float32, spec.KVHeads*r*hd)
	for l := range spec.Layers {
		for h := range spec.KVHeads {
			for i, t := range rows {
				copy(k[(h*r+i)*hd:(h*r+i+1)*hd], b.in.K[l][(h*n+t)*hd:(h*n+t+1)*hd])
				copy(v[(h*r+i)*hd:(h*r+i+1)*hd], b.in.V[l][(h*n+t)*hd:(h*n+t+1)*hd])
			}
		}
		if err := reconstruct.ShiftF32(k, k, b.rope, spec.KVHeads, r, -b.in.BasePosition); err != nil {
			return err
		}
		b.m.ResidentK[l] = make([]byte, len(k)*spec.DType.Size())
		b.m.ResidentV[l] = make([]byte, len(v)*spec.DType.Size())
		if err := format.FromF32(b.m.ResidentK[l], k, spec.DType); err != nil {
			return fmt.Errorf("%w: resident keys of layer %d: %v", ErrInvalidArgument, l, err)
		}
		if err := format.FromF32(b.m.ResidentV[l], v, spec.DType); err != nil {
			return fmt.Errorf("%w: resident values of layer %d: %v", ErrInvalidArgument, l, err)
		}
	}
	return nil
}
