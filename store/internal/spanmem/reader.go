package spanmem

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Records is what a Reader reads from the store on first use: head
// records, the root record again (after compaction moved the memory), and
// the model's artifacts (Routing). Enter admits a read on the open store
// and Leave ends it.
type Records interface {
	Enter() error
	Leave()
	// Head reads the record of (layer, head) decoded against m
	// (format.DecodeHeadMeta): format.ErrOtherWrite when it belongs to
	// another write or place of the memory, found false when absent.
	Head(m *format.SpanMeta, layer, head int) (h *format.HeadMeta, found bool, err error)
	// Meta reads the memory's root record now.
	Meta() (*format.SpanMeta, error)
	Artifacts
}

// ReaderOptions are the store's errors a Reader returns (so that errors.Is
// works with the store's names) and what it does on Release.
type ReaderOptions struct {
	Closed, NotFound error
	Released         func() // after the blob file is released
	// BlockTimer, when not nil, is called as each block read starts and
	// returns what to call when it ends (the store's latency histogram).
	BlockTimer func() (done func())
}

// maxAttempts bounds the re-reads of a head record that another write
// moved under the reader.
const maxAttempts = 4

// NewReader is a reader of the memory of root record m, named name, in
// blob file f (the caller's reference, released by Release) read through
// blocks; rope is the model's, for reconstruction.
func NewReader(name string, m *format.SpanMeta, f *bloblog.File, blocks *Blocks, rope *reconstruct.RoPE, rec Records, o ReaderOptions) *Reader {
	return &Reader{rec: rec, o: o, name: name, meta: m, file: f, blocks: blocks,
		rope: rope, heads: make([]*format.HeadMeta, m.Layers*m.KVHeads)}
}

// Reader reads one stored span memory piece by piece: the root record
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
// them or use them after Release. A Reader is safe for concurrent use.
type Reader struct {
	rec    Records
	o      ReaderOptions
	name   string
	meta   *format.SpanMeta
	file   *bloblog.File
	blocks *Blocks
	rope   *reconstruct.RoPE

	mu       sync.RWMutex // Release takes it exclusively
	released bool

	headsMu sync.Mutex
	heads   []*format.HeadMeta // per group, read on first use
}

// Meta returns the memory's root record. Do not modify it.
func (r *Reader) Meta() *format.SpanMeta { return r.meta }

// ID is the memory's context id.
func (r *Reader) ID() format.ContextID { return r.meta.Context }

// RoPE is the model's rotary embedding, for reconstruction.
func (r *Reader) RoPE() *reconstruct.RoPE { return r.rope }

// Head returns the record of (layer, KV head): its factor blocks and
// summaries, read from the catalog on first use and kept. Do not modify it.
// A memory that compaction moved since the reader was opened reads on
// (its blocks keep their offsets in the extent, which the reader pins at
// its old place); one deleted or replaced since is ErrNotFound.
func (r *Reader) Head(layer, head int) (*format.HeadMeta, error) {
	if err := r.checkHead(layer, head); err != nil {
		return nil, err
	}
	g := layer*r.meta.KVHeads + head
	r.headsMu.Lock()
	defer r.headsMu.Unlock()
	if h := r.heads[g]; h != nil {
		return h, nil
	}
	if err := r.rec.Enter(); err != nil {
		return nil, err
	}
	defer r.rec.Leave()
	meta := r.meta
	for range maxAttempts {
		h, err := r.readHead(meta, layer, head)
		if !errors.Is(err, format.ErrOtherWrite) {
			if err != nil {
				return nil, err
			}
			r.heads[g] = h
			return h, nil
		}
		if meta, err = r.movedMeta(); err != nil {
			return nil, fmt.Errorf("span memory %q layer %d head %d: %w", r.name, layer, head, err)
		}
	}
	return nil, fmt.Errorf("%w: span memory %q layer %d head %d: its records kept moving", r.o.NotFound, r.name, layer, head)
}

// readHead reads the record of (layer, head) and decodes it against m:
// format.ErrOtherWrite when it belongs to another write or place of the memory.
func (r *Reader) readHead(m *format.SpanMeta, layer, head int) (*format.HeadMeta, error) {
	h, found, err := r.rec.Head(m, layer, head)
	switch {
	case errors.Is(err, format.ErrOtherWrite):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("store: span memory %q layer %d head %d: %w", r.name, layer, head, err)
	case !found:
		return nil, fmt.Errorf("%w: span memory %q layer %d head %d: no record (the memory was deleted or replaced)",
			r.o.NotFound, r.name, layer, head)
	case h.Layer != layer || h.Head != head:
		return nil, fmt.Errorf("%w: span memory %q: record of layer %d head %d under the key of layer %d head %d",
			format.ErrCorruption, r.name, h.Layer, h.Head, layer, head)
	}
	return h, nil
}

// movedMeta returns the memory's root record now, if it is the write the
// reader was opened on at another place (moved by compaction): same
// context, creation time, extent length and resident blocks. A memory
// replaced or deleted since is ErrNotFound.
func (r *Reader) movedMeta() (*format.SpanMeta, error) {
	m, err := r.rec.Meta()
	if err != nil {
		return nil, err
	}
	if !SameWrite(r.meta, m) {
		return nil, fmt.Errorf("%w: the memory was replaced since the reader was opened", r.o.NotFound)
	}
	return m, nil
}

// Summaries returns the span summaries of (layer, KV head): per span the
// summary key and value (pre-RoPE) and the projected key.
func (r *Reader) Summaries(layer, head int) ([]segment.Summary, error) {
	h, err := r.Head(layer, head)
	if err != nil {
		return nil, err
	}
	return SegmentSummaries(h.Summaries), nil
}

func (r *Reader) checkHead(layer, head int) error { return CheckHead(r.meta, layer, head) }

// factorBlock returns the block of one span's K or V factors.
func (r *Reader) factorBlock(layer, head, span int, kind format.ChunkKind) (format.FactorBlock, error) {
	h, err := r.Head(layer, head)
	if err != nil {
		return format.FactorBlock{}, err
	}
	return FactorBlock(r.meta, h, span, kind)
}

// FactorBytes returns the stored factor encoding (reconstruct.AppendFactors)
// of one span's keys (kind K) or values (V) in (layer, KV head), verified
// against its CRC32C. On a mapped blob file it aliases the mapping.
func (r *Reader) FactorBytes(layer, head, span int, kind format.ChunkKind) ([]byte, error) {
	f, err := r.factorBlock(layer, head, span, kind)
	if err != nil {
		return nil, err
	}
	return r.block(nil, f.Offset, uint64(f.Length), f.CRC, func() string {
		return fmt.Sprintf("layer %d head %d span %d %v factors", layer, head, span, kind)
	})
}

// FactorSize is the length of FactorBytes' result, without reading it.
func (r *Reader) FactorSize(layer, head, span int, kind format.ChunkKind) (int, error) {
	f, err := r.factorBlock(layer, head, span, kind)
	return int(f.Length), err
}

// ReadFactors copies what FactorBytes returns into dst, which must be
// exactly FactorSize bytes, verifying it there.
func (r *Reader) ReadFactors(dst []byte, layer, head, span int, kind format.ChunkKind) error {
	f, err := r.factorBlock(layer, head, span, kind)
	if err != nil {
		return err
	}
	if len(dst) != int(f.Length) {
		return fmt.Errorf("%w: read factors into %d bytes, the block has %d", ErrInvalidArgument, len(dst), f.Length)
	}
	_, err = r.block(dst, f.Offset, uint64(f.Length), f.CRC, func() string {
		return fmt.Sprintf("layer %d head %d span %d %v factors", layer, head, span, kind)
	})
	return err
}

// Factors returns one span's factors decoded to float32.
func (r *Reader) Factors(layer, head, span int, kind format.ChunkKind) (*reconstruct.Factors, error) {
	b, err := r.FactorBytes(layer, head, span, kind)
	if err != nil {
		return nil, err
	}
	f, _, err := reconstruct.DecodeFactors(b)
	if err != nil {
		return nil, fmt.Errorf("span memory %q layer %d head %d span %d %v: %w", r.name, layer, head, span, kind, err)
	}
	return f, nil
}

// Resident returns layer l's resident rows, K and V each
// [KVHeads][len(Meta().Resident)][HeadDim] in Meta().ResidentDType, keys
// post-RoPE at local positions (row t of the context at position t):
// reconstruct.Shift them by the context's target base position.
func (r *Reader) Resident(layer int) (k, v []byte, err error) {
	if err := r.checkHead(layer, 0); err != nil {
		return nil, nil, err
	}
	b := r.meta.Blocks[layer]
	if k, err = r.block(nil, b.KOffset, b.Length, b.KCRC, func() string { return fmt.Sprintf("layer %d resident K", layer) }); err != nil {
		return nil, nil, err
	}
	if v, err = r.block(nil, b.VOffset, b.Length, b.VCRC, func() string { return fmt.Sprintf("layer %d resident V", layer) }); err != nil {
		return nil, nil, err
	}
	return k, v, nil
}

// ReconstructSpan reconstructs one span of (layer, KV head) into k and v
// (span length x HeadDim float32 each): keys with RoPE applied for
// positions base+Start .. base+End-1 in the same pass, values as they are.
// base is the context's target base position (Meta().BasePosition to
// rebuild the keys the model attended with).
func (r *Reader) ReconstructSpan(layer, head, span int, base int64, k, v []float32) error {
	kf, err := r.Factors(layer, head, span, format.ChunkK)
	if err != nil {
		return err
	}
	vf, err := r.Factors(layer, head, span, format.ChunkV)
	if err != nil {
		return err
	}
	pos := Positions(r.meta.Spans[span], base)
	if err := reconstruct.ReconstructInto(k, kf, nil, r.rope, pos); err != nil {
		return err
	}
	return reconstruct.ReconstructInto(v, vf, nil, nil, nil)
}

// Release ends the reader: its blob file may then be unmapped. It is
// idempotent; afterwards every read returns ErrClosed.
func (r *Reader) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	r.blocks.Drop()
	r.file.Release()
	if r.o.Released != nil {
		r.o.Released()
	}
}

// block returns [off, off+n) of the extent, verified (Blocks.Read);
// ErrClosed after Release.
func (r *Reader) block(dst []byte, off, n uint64, crc uint32, what func() string) ([]byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.released {
		return nil, fmt.Errorf("%w: span memory %q: reader was released", r.o.Closed, r.name)
	}
	if r.o.BlockTimer != nil {
		defer r.o.BlockTimer()()
	}
	return r.blocks.Read(dst, off, n, crc, what)
}

// Routing loads the memory's routing state: every head's summaries and the
// model's artifacts. W is ArtifactRouterW when stored (a trained router),
// else the artifact the memory was built with; tau comes from ArtifactTau
// (default reconstruct.DefaultTau), the bias from ArtifactRouterBias and
// the recency weight from ArtifactRouterRecency (default 0). An untrained PCA W scores with Scale 1/sqrt(HeadDim), a
// trained one with SeKV's plain sigmoid(W q . s + b). It is
// ErrInvalidArgument for a memory without a projection and ErrNotFound when
// its W artifact is gone and no trained one exists.
func (r *Reader) Routing() (*Routing, error) {
	m := r.meta
	if m.ProjDim == 0 {
		return nil, fmt.Errorf("%w: span memory %q has no routing projection", ErrInvalidArgument, r.name)
	}
	projs, name, same, err := r.routingProjection()
	if err != nil {
		return nil, err
	}
	tau, err := r.rec.HeadValues(ArtifactTau)
	if err != nil {
		return nil, err
	}
	bias, err := r.rec.HeadValues(ArtifactRouterBias)
	if err != nil {
		return nil, err
	}
	recency, err := r.rec.HeadValues(ArtifactRouterRecency)
	if err != nil {
		return nil, err
	}
	return NewRouting(m, projs, name, same, tau, bias, recency, r.Head)
}

// routingProjection loads W: the trained one when stored, else the
// memory's. same reports that it is the W the memory's keys were
// projected with.
func (r *Reader) routingProjection() (projs []*segment.Projection, name string, same bool, err error) {
	m := r.meta
	for _, name := range []string{ArtifactRouterW, m.Projection} {
		a, ok, err := r.rec.Artifact(name)
		if err != nil {
			return nil, "", false, err
		}
		if !ok {
			continue
		}
		projs, err := DecodeProjections(a.Data, a.Meta, m.Layers, m.KVHeads, m.HeadDim)
		if err != nil {
			return nil, "", false, fmt.Errorf("artifact %q: %w", name, err)
		}
		return projs, name, name == m.Projection && a.Hash == m.ProjectionHash, nil
	}
	return nil, "", false, fmt.Errorf("%w: span memory %q: routing projection %q of model %s", r.o.NotFound, r.name, m.Projection, m.Model.Short())
}

// ReaderFile is r's blob file, for the store's tests (not a method, so
// that it stays off the public SpanReader).
func ReaderFile(r *Reader) *bloblog.File { return r.file }
