package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// SpanReader reads one stored span memory piece by piece: the root record
// is read when it is opened, each (layer, KV head)'s record on first use,
// and each block (one layer's resident rows, one span's K or V factors of
// one head) only when asked for, verified against its own CRC32C. Nothing
// else of the memory is touched.
//
// Like a View it pins its blob file: the bytes stay valid, even if the
// memory is deleted, replaced or moved by compaction, until Release. Head
// records come from the catalog on first use, so the first Head, Summaries
// or Factors call of each head needs the DB open, and is ErrNotFound if the
// memory was deleted or replaced since the reader was opened (heads
// already read stay readable); a memory only moved by compaction reads
// on. Returned byte slices may alias a read-only mapping: do not write to
// them or use them after Release. A SpanReader is safe for concurrent use.
type SpanReader struct {
	in *spanmem.Reader
}

// fromSpanReader wraps spanmem's reader; nil stays nil.
func fromSpanReader(r *spanmem.Reader) *SpanReader {
	if r == nil {
		return nil
	}
	return &SpanReader{in: r}
}

// Meta returns the memory's root record. Do not modify it.
func (r *SpanReader) Meta() *format.SpanMeta { return r.in.Meta() }

// ID is the memory's context id.
func (r *SpanReader) ID() ContextID { return r.in.ID() }

// RoPE is the model's rotary embedding, for reconstruction.
func (r *SpanReader) RoPE() *reconstruct.RoPE { return r.in.RoPE() }

// Head returns the record of (layer, KV head): its factor blocks and
// summaries, read from the catalog on first use and kept. Do not modify it.
// A memory that compaction moved since the reader was opened reads on
// (its blocks keep their offsets in the extent, which the reader pins at
// its old place); one deleted or replaced since is ErrNotFound.
func (r *SpanReader) Head(layer, head int) (*format.HeadMeta, error) { return r.in.Head(layer, head) }

// Summaries returns the span summaries of (layer, KV head): per span the
// summary key and value (pre-RoPE) and the projected key.
func (r *SpanReader) Summaries(layer, head int) ([]segment.Summary, error) {
	return r.in.Summaries(layer, head)
}

// FactorBytes returns the stored factor encoding (reconstruct.AppendFactors)
// of one span's keys (kind K) or values (V) in (layer, KV head), verified
// against its CRC32C. On a mapped blob file it aliases the mapping.
func (r *SpanReader) FactorBytes(layer, head, span int, kind format.ChunkKind) ([]byte, error) {
	return r.in.FactorBytes(layer, head, span, kind)
}

// FactorSize is the length of FactorBytes' result, without reading it.
func (r *SpanReader) FactorSize(layer, head, span int, kind format.ChunkKind) (int, error) {
	return r.in.FactorSize(layer, head, span, kind)
}

// ReadFactors copies what FactorBytes returns into dst, which must be
// exactly FactorSize bytes, verifying it there.
func (r *SpanReader) ReadFactors(dst []byte, layer, head, span int, kind format.ChunkKind) error {
	return r.in.ReadFactors(dst, layer, head, span, kind)
}

// Factors returns one span's factors decoded to float32.
func (r *SpanReader) Factors(layer, head, span int, kind format.ChunkKind) (*reconstruct.Factors, error) {
	return r.in.Factors(layer, head, span, kind)
}

// Resident returns layer l's resident rows, K and V each
// [KVHeads][len(Meta().Resident)][HeadDim] in Meta().ResidentDType, keys
// post-RoPE at local positions (row t of the context at position t):
// reconstruct.Shift them by the context's target base position.
func (r *SpanReader) Resident(layer int) (k, v []byte, err error) { return r.in.Resident(layer) }

// ReconstructSpan reconstructs one span of (layer, KV head) into k and v
// (span length x HeadDim float32 each): keys with RoPE applied for
// positions base+Start .. base+End-1 in the same pass, values as they are.
// base is the context's target base position (Meta().BasePosition to
// rebuild the keys the model attended with).
func (r *SpanReader) ReconstructSpan(layer, head, span int, base int64, k, v []float32) error {
	return r.in.ReconstructSpan(layer, head, span, base, k, v)
}

// Routing loads the memory's routing state: every head's summaries and the
// model's artifacts. W is ArtifactRouterW when stored (a trained router),
// else the artifact the memory was built with; tau comes from ArtifactTau
// (default reconstruct.DefaultTau), the bias from ArtifactRouterBias and
// the recency weight rho from ArtifactRouterRecency (default 0). An
// untrained PCA W scores with Scale 1/sqrt(HeadDim), a trained one with
// SeKV's plain sigmoid(W q . s + b), plus rho times the span's recency
// (reconstruct.Recency) where rho is stored. It is
// ErrInvalidArgument for a memory without a projection and ErrNotFound when
// its W artifact is gone and no trained one exists.
func (r *SpanReader) Routing() (*Routing, error) {
	rt, err := r.in.Routing()
	return fromRouting(rt), err
}

// Release ends the reader: its blob file may then be unmapped. It is
// idempotent; afterwards every read returns ErrClosed.
func (r *SpanReader) Release() { r.in.Release() }
