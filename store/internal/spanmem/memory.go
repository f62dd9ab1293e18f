package spanmem

import (
	"errors"
	"fmt"
	"math"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// Memory is SeKV's memory of one long context, as Build makes it and
// the store's PutSpanMemory stores it: the context cut into spans, the
// resident rows kept at full resolution (anchors and the tokens of spans
// too short to factor or whose factors would not make the memory smaller;
// neighbouring resident spans are one span), and per (layer, KV head) a
// summary of every span and truncated SVD factors of every factored
// span's pre-RoPE keys and values.
type Memory struct {
	Model        format.ModelSpec
	Tokens       int
	BasePosition int64 // position of row 0 when the memory was built
	Segmentation *segment.Segmentation
	// Resident rows, ascending: every anchor and every token of an
	// unfactored span.
	Resident []int
	// ResidentK and ResidentV hold, per layer, the resident rows
	// [KVHeads][len(Resident)][HeadDim] in Model.DType; keys post-RoPE at
	// local positions (row t rotated for position t), as packets store them.
	ResidentK, ResidentV [][]byte
	// Heads is per (layer, KV head), layer-major.
	Heads       []Head
	FactorDType format.DType
	Projection  ProjectionRef
}

// Head is one (layer, KV head) of a Memory.
type Head struct {
	Summaries []segment.Summary // per span
	// K and V are per span the factors of its pre-RoPE keys and of its
	// values; nil for spans that are not factored.
	K, V []*reconstruct.Factors
}

// ProjectionRef names the routing projection W the summaries were
// projected with.
type ProjectionRef struct {
	Name string   // artifact name (ArtifactRouterW or ArtifactRouterWPCA); "" for none
	Hash [32]byte // BLAKE3-256 of the artifact's data
	Dim  int      // d'
	// Fitted holds the artifact (data and meta) when BuildSpanMemory fitted
	// W itself: PutSpanMemory stores it in the memory's commit.
	Fitted     []byte
	FittedMeta format.ArtifactMeta
}

// Check validates a Memory before anything is written. Errors wrap
// ErrInvalidArgument.
func (m *Memory) Check() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: span memory: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	if err := m.Model.Validate(); err != nil {
		return fmt.Errorf("span memory: %w", err)
	}
	spec, seg := &m.Model, m.Segmentation
	switch {
	case m.Tokens < 1 || uint64(m.Tokens) > math.MaxUint32:
		return bad("%d tokens", m.Tokens)
	case seg == nil || seg.Tokens != m.Tokens || len(seg.Spans) == 0:
		return bad("no segmentation of its %d tokens", m.Tokens)
	case !m.FactorDType.Float():
		return bad("factor dtype %v", m.FactorDType)
	case len(m.Heads) != spec.Layers*spec.KVHeads || len(m.ResidentK) != spec.Layers || len(m.ResidentV) != spec.Layers:
		return bad("%d heads, %d K and %d V resident layers for %d layers x %d kv heads",
			len(m.Heads), len(m.ResidentK), len(m.ResidentV), spec.Layers, spec.KVHeads)
	case m.Projection.Dim < 0 || m.Projection.Dim > spec.HeadDim || (m.Projection.Dim == 0) != (m.Projection.Name == ""):
		return bad("projection %q of dim %d", m.Projection.Name, m.Projection.Dim)
	}
	if err := m.Projection.checkFitted(spec); err != nil {
		return err
	}
	rowBytes := spec.KVHeads * len(m.Resident) * spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		if len(m.ResidentK[l]) != rowBytes || len(m.ResidentV[l]) != rowBytes {
			return bad("layer %d: resident K %d, V %d bytes, want %d", l, len(m.ResidentK[l]), len(m.ResidentV[l]), rowBytes)
		}
	}
	for g := range m.Heads {
		if err := m.checkHead(g); err != nil {
			return bad("layer %d head %d: %v", g/spec.KVHeads, g%spec.KVHeads, err)
		}
	}
	return nil
}

// checkHead checks one head's summaries and factors against the spans.
func (m *Memory) checkHead(g int) error {
	h, spans := &m.Heads[g], m.Segmentation.Spans
	if len(h.Summaries) != len(spans) || len(h.K) != len(spans) || len(h.V) != len(spans) {
		return fmt.Errorf("%d summaries, %d K and %d V factors for %d spans", len(h.Summaries), len(h.K), len(h.V), len(spans))
	}
	for s, sp := range spans {
		for _, f := range []*reconstruct.Factors{h.K[s], h.V[s]} {
			switch {
			case sp.Factored && f == nil:
				return fmt.Errorf("span %d is factored but has no factors", s)
			case !sp.Factored && f != nil:
				return fmt.Errorf("span %d is not factored but has factors", s)
			case f != nil && (f.Rows != sp.Len() || f.Cols != m.Model.HeadDim):
				return fmt.Errorf("span %d of %d tokens has %dx%d factors", s, sp.Len(), f.Rows, f.Cols)
			}
		}
	}
	return nil
}

// checkFitted checks that a fitted W is what Hash and Dim say.
func (p *ProjectionRef) checkFitted(spec *format.ModelSpec) error {
	if p.Fitted == nil {
		return nil
	}
	ps, err := DecodeProjections(p.Fitted, p.FittedMeta, spec.Layers, spec.KVHeads, spec.HeadDim)
	switch {
	case err != nil:
		return fmt.Errorf("span memory: fitted W: %w", err)
	case blake3.Sum256(p.Fitted) != p.Hash || ps[0].Dim != p.Dim:
		return fmt.Errorf("%w: span memory: fitted W does not match its hash or dim %d", ErrInvalidArgument, p.Dim)
	}
	return nil
}

// Size is the room a span memory takes once stored, against the rows it
// stands for.
type Size struct {
	// Extent is its extent in the blob log: resident rows, factor blocks,
	// the padding between and after them, the trailer.
	Extent int64
	// Records is its catalog values: the root record and one per (layer,
	// KV head), with their summaries (the keys, and a W it fitted, stored
	// once per model, are not counted).
	Records int64
	// RawBF16 is the context's K and V rows in bf16:
	// Tokens x Layers x KVHeads x HeadDim x 2 x 2 bytes.
	RawBF16 int64
	// Raw is the same rows in the model's dtype (RawBF16 for a 16-bit
	// model, twice it for f32): what Build keeps Stored at or below.
	Raw int64
}

// Stored is Extent + Records.
func (s Size) Stored() int64 { return s.Extent + s.Records }

// Size lays m out as PutSpanMemory would and measures it. Errors wrap
// ErrInvalidArgument (m does not check, or does not encode).
func (m *Memory) Size() (Size, error) {
	if err := m.Check(); err != nil {
		return Size{}, err
	}
	e, err := LayoutExtent(m)
	if err != nil {
		return Size{}, err
	}
	meta := e.Meta(m, format.ContextID{}, 0, format.BlobHeaderSize) // any valid place: the sizes do not depend on it
	root, err := meta.Encode()
	if err != nil {
		return Size{}, err
	}
	spec := &m.Model
	s := Size{Extent: int64(e.Length), Records: int64(len(root)),
		RawBF16: int64(m.Tokens) * int64(spec.Layers*spec.KVHeads*spec.HeadDim) * 2 * 2, Raw: m.rawBytes()}
	for g := range m.Heads {
		h, err := e.Head(m, g).Encode(meta)
		if err != nil {
			return Size{}, err
		}
		s.Records += int64(len(h))
	}
	return s, nil
}

// ErrNotSmaller: Build would make a span memory that takes more room once
// stored than the rows it stands for (Size.Stored past Size.Raw): the
// context's rows do not compress enough to pay for what every memory
// carries (its records, the extent's padding and trailer). Store the rows
// as a packet instead.
var ErrNotSmaller = errors.New("kvstore/store: span memory not smaller than its raw rows")

// rawBytes is Size.Raw: the context's K and V rows in the model's dtype.
func (m *Memory) rawBytes() int64 {
	spec := &m.Model
	return int64(m.Tokens) * int64(spec.Layers*spec.KVHeads*spec.HeadDim) * 2 * int64(spec.DType.Size())
}

// storedBytes is Size.Stored of a memory Build made, computed without
// laying it out: the extent (LayoutExtent's blocks in its order, each at
// the next ChunkAlignment, then the trailer and the 4 KiB alignment) and
// the root and head records.
func (m *Memory) storedBytes() int64 {
	spec := &m.Model
	var end uint64
	place := func(n uint64) {
		end = (end+format.ChunkAlignment-1)/format.ChunkAlignment*format.ChunkAlignment + n
	}
	res := uint64(spec.KVHeads * len(m.Resident) * spec.HeadDim * spec.DType.Size())
	for range spec.Layers {
		place(res)
		place(res)
	}
	for _, h := range m.Heads {
		for s, k := range h.K {
			if k == nil {
				continue
			}
			for _, f := range []*reconstruct.Factors{k, h.V[s]} {
				place(uint64(format.FactorLayout{Rows: f.Rows, Cols: f.Cols, Rank: f.Rank, DType: m.FactorDType}.Size()))
			}
		}
	}
	ext, _ := format.ExtentLength(end)
	spans := len(m.Segmentation.Spans)
	root := format.SpanMetaLen(spans, len(m.Resident), len(m.Segmentation.Anchors), spec.Layers, len(m.Projection.Name))
	return int64(ext) + int64(root) + int64(len(m.Heads)*format.HeadMetaLen(spans, spec.HeadDim, m.Projection.Dim))
}
