package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// SpanMemory is SeKV's memory of one long context, as BuildSpanMemory
// makes it and PutSpanMemory stores it: the context cut into spans, the
// resident rows kept at full resolution (anchors and the tokens of spans
// too short to factor or whose factors would not make the memory smaller;
// neighbouring resident spans are one span), and per (layer, KV head) a
// summary of every span and truncated SVD factors of every factored
// span's pre-RoPE keys and values.
type SpanMemory struct {
	// Model is the spec of the model the context's KV cache came from.
	Model format.ModelSpec
	// Tokens is the context's length.
	Tokens int
	// BasePosition is the position of row 0 when the memory was built.
	BasePosition int64
	// Segmentation cuts the context into spans (segment.Split).
	Segmentation *segment.Segmentation
	// Resident rows, ascending: every anchor and every token of an
	// unfactored span.
	Resident []int
	// ResidentK and ResidentV hold, per layer, the resident rows
	// [KVHeads][len(Resident)][HeadDim] in Model.DType; keys post-RoPE at
	// local positions (row t rotated for position t), as packets store them.
	ResidentK, ResidentV [][]byte
	// Heads is per (layer, KV head), layer-major.
	Heads []SpanHead
	// FactorDType is the storage dtype of the factors.
	FactorDType format.DType
	// Projection names the routing projection W the summaries were
	// projected with.
	Projection ProjectionRef
}

// Check validates m as PutSpanMemory does before anything is written: its
// spec, segmentation, resident rows, heads and projection agree. Errors
// wrap ErrInvalidArgument.
func (m *SpanMemory) Check() error { return toSpanMemory(m).Check() }

// SpanSize is the room a span memory takes once stored (SpanMemory.Size),
// against the raw rows it stands for.
type SpanSize struct {
	// Extent is its extent in the blob log: resident rows, factor blocks,
	// padding and trailer.
	Extent int64
	// Records is its catalog values: the root record and one record per
	// (layer, KV head) with the span summaries (not their keys, nor a W
	// fitted with it, stored once per model).
	Records int64
	// RawBF16 is the context's K and V rows in bf16: Tokens x Layers x
	// KVHeads x HeadDim x 2 x 2 bytes.
	RawBF16 int64
	// Raw is the same rows in the model's dtype: RawBF16 for a 16-bit
	// model, twice it for f32. BuildSpanMemory (without
	// SpanOptions.FactorAll) makes no memory whose Stored is more.
	Raw int64
}

// Stored is Extent + Records, what PutSpanMemory writes for m.
func (s SpanSize) Stored() int64 { return s.Extent + s.Records }

// Size measures m as PutSpanMemory would store it. Errors wrap
// ErrInvalidArgument where m does not check.
func (m *SpanMemory) Size() (SpanSize, error) {
	s, err := toSpanMemory(m).Size()
	return SpanSize(s), err
}

// fromSpanMemory is spanmem's memory as the store's; nil stays nil.
func fromSpanMemory(m *spanmem.Memory) *SpanMemory {
	if m == nil {
		return nil
	}
	return &SpanMemory{Model: m.Model, Tokens: m.Tokens, BasePosition: m.BasePosition, Segmentation: m.Segmentation,
		Resident: m.Resident, ResidentK: m.ResidentK, ResidentV: m.ResidentV, Heads: mapSlice(m.Heads, fromSpanHead),
		FactorDType: m.FactorDType, Projection: ProjectionRef(m.Projection)}
}

// toSpanMemory is m as spanmem's (its buffers shared); nil stays nil.
func toSpanMemory(m *SpanMemory) *spanmem.Memory {
	if m == nil {
		return nil
	}
	return &spanmem.Memory{Model: m.Model, Tokens: m.Tokens, BasePosition: m.BasePosition, Segmentation: m.Segmentation,
		Resident: m.Resident, ResidentK: m.ResidentK, ResidentV: m.ResidentV, Heads: mapSlice(m.Heads, toSpanHead),
		FactorDType: m.FactorDType, Projection: spanmem.ProjectionRef(m.Projection)}
}

// SpanHead is one (layer, KV head) of a SpanMemory.
type SpanHead struct {
	// Summaries is per span its summary (segment.Summary).
	Summaries []segment.Summary
	// K and V are per span the factors of its pre-RoPE keys and of its
	// values; nil for spans that are not factored.
	K, V []*reconstruct.Factors
}

// fromSpanHead is spanmem's head as the store's (the same fields).
func fromSpanHead(h spanmem.Head) SpanHead { return SpanHead(h) }

// toSpanHead is h as spanmem's.
func toSpanHead(h SpanHead) spanmem.Head { return spanmem.Head(h) }

// ProjectionRef names the routing projection W the summaries were
// projected with.
type ProjectionRef struct {
	// Name is the artifact's name (ArtifactRouterW or ArtifactRouterWPCA);
	// "" for none.
	Name string
	// Hash is the BLAKE3-256 of the artifact's data.
	Hash [32]byte
	// Dim is d', the projected dimension.
	Dim int
	// Fitted holds the artifact (data and meta) when BuildSpanMemory fitted
	// W itself: PutSpanMemory stores it in the memory's commit.
	Fitted     []byte
	FittedMeta ArtifactMeta
}

// SpanInput is a long context's KV cache as BuildSpanMemory takes it.
type SpanInput struct {
	// Model is the spec of the model that computed the cache.
	Model *format.ModelSpec
	// K and V hold, per layer, [KVHeads][tokens][HeadDim] float32 rows;
	// keys post-RoPE, row t rotated for position BasePosition+t (what the
	// model attended with).
	K, V [][]float32
	// BasePosition is the position of row 0.
	BasePosition int64
	// Surprisal is H_t = -ln p(x_t | x_<t) per token, NaN where unknown
	// (the first token); see segment.Split for non-finite values.
	Surprisal []float32
}

// Check validates in as BuildSpanMemory does: a valid spec, at least one
// token, a base position that leaves room for them, and K and V of the
// shape the spec and Surprisal give. Errors wrap ErrInvalidArgument.
func (in *SpanInput) Check() error { return toSpanInput(in).Check() }

// toSpanInput is in as spanmem's (the same fields).
func toSpanInput(in *SpanInput) *spanmem.Input { return (*spanmem.Input)(in) }

// SpanOptions configure BuildSpanMemory. The zero value is SeKV's defaults.
type SpanOptions struct {
	// Segment configures the segmentation by surprisal (segment.Split).
	Segment segment.Options
	// ProjectionDim is d' of a W fitted here (no W artifact stored); 0
	// means segment.DefaultProjectionDim; clipped to the head dim.
	ProjectionDim int
	// SVD bounds the factors: MaxRank (r_max, default 32) and Energy
	// (default 0.99) choose each span's rank unless the model has an
	// ArtifactRank, whose per (layer, head) rank then applies. Rank is
	// ignored; Seed is mixed with (layer, head, span, K|V).
	SVD reconstruct.SVDOptions
	// FactorDType is the storage dtype of factors; 0 means
	// DefaultSpanFactorDType. A span keeps its rows resident where its
	// factors would not make the memory smaller, would take as much room
	// as its rows in bf16 or more, or where the dtype cannot hold them.
	FactorDType format.DType
	// FactorAll keeps the factors of every span the segmentation factors,
	// even where they take more room than its rows in bf16, leaves the
	// spans as the segmentation cut them, and builds a memory larger than
	// its rows rather than refusing it (ErrSpanNotSmaller): for
	// measurements of factors on models whose rows do not compress.
	FactorAll bool
	// KeepResidentSpans leaves resident spans as the segmentation cut
	// them, each with its own records, rather than making each run of
	// them one span: for a reader that keeps unfactored spans off the GPU
	// too and moves their stored rows in by the span, as it zooms
	// factored ones. The size rule counts each one's records.
	KeepResidentSpans bool
	// ResidentTail, when above 0, keeps the rows of the spans that hold
	// the context's last ResidentTail tokens (never factored): for a
	// reader that keeps a window of the most recent rows on some heads,
	// which then reads them exact. The size rule counts them as any
	// resident span. Negative is invalid.
	ResidentTail int
}

// DefaultSpanFactorDType is SpanOptions' FactorDType when left 0: f16.
const DefaultSpanFactorDType = spanmem.DefaultFactorDType

// toSpanOptions is o as spanmem's (the same fields).
func toSpanOptions(o *SpanOptions) *spanmem.Options { return (*spanmem.Options)(o) }
