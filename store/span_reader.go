package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
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
	db     *DB
	ns     string
	name   string
	meta   *SpanMeta
	file   *bloblog.File
	blocks *spanmem.Blocks
	rope   *reconstruct.RoPE

	mu       sync.RWMutex // Release takes it exclusively
	released bool

	headsMu sync.Mutex
	heads   []*HeadMeta // per group, read on first use
}

// OpenSpanMemory opens the span memory of context name in namespace ns,
// stored for model. It is ErrNotFound if absent and ErrModelMismatch if
// stored for another model (nothing of it is read). Release the reader
// when done.
func (db *DB) OpenSpanMemory(ns string, model format.Fingerprint, name string) (*SpanReader, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	if err := checkContextName(ns, name); err != nil {
		return nil, err
	}
	for range maxGetAttempts {
		m, err := db.spanMeta(ns, name)
		if err != nil {
			return nil, err
		}
		if m.Model != model {
			return nil, fmt.Errorf("%w: span memory %q in namespace %q was stored for model %s, not %s",
				ErrModelMismatch, name, ns, m.Model.Short(), model.Short())
		}
		f := db.file(m.BlobFile)
		if f == nil {
			continue
		}
		r, err := db.newSpanReader(ns, name, m, f)
		if err != nil {
			f.Release()
			return nil, err
		}
		db.st.views.Add(1)
		return r, nil
	}
	return nil, fmt.Errorf("%w: span memory %q: blob file missing from the catalog", ErrCorruption, name)
}

func (db *DB) newSpanReader(ns, name string, m *SpanMeta, f *bloblog.File) (*SpanReader, error) {
	spec, err := db.Model(m.Model)
	if err != nil {
		return nil, fmt.Errorf("span memory %q: %w", name, err)
	}
	rope, err := reconstruct.NewRoPE(spec.RoPE, m.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("%w: span memory %q: model spec: %v", ErrCorruption, name, err)
	}
	blocks, err := spanmem.NewBlocks(name, m, f, !db.opts.DisableChecksums, spanCounters{&db.st})
	if err != nil {
		return nil, err
	}
	return &SpanReader{db: db, ns: ns, name: name, meta: m, file: f, blocks: blocks,
		rope: rope, heads: make([]*HeadMeta, m.Layers*m.KVHeads)}, nil
}

// Meta returns the memory's root record. Do not modify it.
func (r *SpanReader) Meta() *SpanMeta { return r.meta }

// ID is the memory's context id.
func (r *SpanReader) ID() ContextID { return r.meta.Context }

// RoPE is the model's rotary embedding, for reconstruction.
func (r *SpanReader) RoPE() *reconstruct.RoPE { return r.rope }

// Head returns the record of (layer, KV head): its factor blocks and
// summaries, read from the catalog on first use and kept. Do not modify it.
// A memory that compaction moved since the reader was opened reads on
// (its blocks keep their offsets in the extent, which the reader pins at
// its old place); one deleted or replaced since is ErrNotFound.
func (r *SpanReader) Head(layer, head int) (*HeadMeta, error) {
	if err := r.checkHead(layer, head); err != nil {
		return nil, err
	}
	g := layer*r.meta.KVHeads + head
	r.headsMu.Lock()
	defer r.headsMu.Unlock()
	if h := r.heads[g]; h != nil {
		return h, nil
	}
	if err := r.db.enter(); err != nil {
		return nil, err
	}
	defer r.db.leave()
	meta := r.meta
	for range maxGetAttempts {
		h, err := r.readHead(meta, layer, head)
		if !errors.Is(err, errOtherWrite) {
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
	return nil, fmt.Errorf("%w: span memory %q layer %d head %d: its records kept moving", ErrNotFound, r.name, layer, head)
}

// readHead reads the record of (layer, head) and decodes it against m:
// errOtherWrite when it belongs to another write or place of the memory.
func (r *SpanReader) readHead(m *SpanMeta, layer, head int) (*HeadMeta, error) {
	var h *HeadMeta
	found, err := r.db.cat.Get(catalog.SpanHeadKey(r.ns, r.name, layer, head), func(v []byte) (err error) {
		h, err = decodeHeadMeta(v, m)
		return err
	})
	switch {
	case errors.Is(err, errOtherWrite):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("store: span memory %q layer %d head %d: %w", r.name, layer, head, err)
	case !found:
		return nil, fmt.Errorf("%w: span memory %q layer %d head %d: no record (the memory was deleted or replaced)",
			ErrNotFound, r.name, layer, head)
	case h.Layer != layer || h.Head != head:
		return nil, fmt.Errorf("%w: span memory %q: record of layer %d head %d under the key of layer %d head %d",
			ErrCorruption, r.name, h.Layer, h.Head, layer, head)
	}
	return h, nil
}

// movedMeta returns the memory's root record now, if it is the write the
// reader was opened on at another place (moved by compaction): same
// context, creation time, extent length and resident blocks. A memory
// replaced or deleted since is ErrNotFound.
func (r *SpanReader) movedMeta() (*SpanMeta, error) {
	m, err := r.db.spanMeta(r.ns, r.name)
	if err != nil {
		return nil, err
	}
	if !spanmem.SameWrite(r.meta, m) {
		return nil, fmt.Errorf("%w: the memory was replaced since the reader was opened", ErrNotFound)
	}
	return m, nil
}

// Summaries returns the span summaries of (layer, KV head): per span the
// summary key and value (pre-RoPE) and the projected key.
func (r *SpanReader) Summaries(layer, head int) ([]segment.Summary, error) {
	h, err := r.Head(layer, head)
	if err != nil {
		return nil, err
	}
	return spanmem.SegmentSummaries(h.Summaries), nil
}

func (r *SpanReader) checkHead(layer, head int) error { return spanmem.CheckHead(r.meta, layer, head) }

// factorBlock returns the block of one span's K or V factors.
func (r *SpanReader) factorBlock(layer, head, span int, kind format.ChunkKind) (FactorBlock, error) {
	h, err := r.Head(layer, head)
	if err != nil {
		return FactorBlock{}, err
	}
	return spanmem.FactorBlock(r.meta, h, span, kind)
}

// FactorBytes returns the stored factor encoding (reconstruct.AppendFactors)
// of one span's keys (kind K) or values (V) in (layer, KV head), verified
// against its CRC32C. On a mapped blob file it aliases the mapping.
func (r *SpanReader) FactorBytes(layer, head, span int, kind format.ChunkKind) ([]byte, error) {
	f, err := r.factorBlock(layer, head, span, kind)
	if err != nil {
		return nil, err
	}
	return r.block(nil, f.Offset, uint64(f.Length), f.CRC, func() string {
		return fmt.Sprintf("layer %d head %d span %d %v factors", layer, head, span, kind)
	})
}

// FactorSize is the length of FactorBytes' result, without reading it.
func (r *SpanReader) FactorSize(layer, head, span int, kind format.ChunkKind) (int, error) {
	f, err := r.factorBlock(layer, head, span, kind)
	return int(f.Length), err
}

// ReadFactors copies what FactorBytes returns into dst, which must be
// exactly FactorSize bytes, verifying it there.
func (r *SpanReader) ReadFactors(dst []byte, layer, head, span int, kind format.ChunkKind) error {
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
func (r *SpanReader) Factors(layer, head, span int, kind format.ChunkKind) (*reconstruct.Factors, error) {
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
func (r *SpanReader) Resident(layer int) (k, v []byte, err error) {
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
func (r *SpanReader) ReconstructSpan(layer, head, span int, base int64, k, v []float32) error {
	kf, err := r.Factors(layer, head, span, format.ChunkK)
	if err != nil {
		return err
	}
	vf, err := r.Factors(layer, head, span, format.ChunkV)
	if err != nil {
		return err
	}
	pos := spanmem.Positions(r.meta.Spans[span], base)
	if err := reconstruct.ReconstructInto(k, kf, nil, r.rope, pos); err != nil {
		return err
	}
	return reconstruct.ReconstructInto(v, vf, nil, nil, nil)
}

// Release ends the reader: its blob file may then be unmapped. It is
// idempotent; afterwards every read returns ErrClosed.
func (r *SpanReader) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	r.blocks.Drop()
	r.file.Release()
	r.db.st.views.Add(-1)
}

// block returns [off, off+n) of the extent, verified (spanmem.Blocks.Read);
// ErrClosed after Release.
func (r *SpanReader) block(dst []byte, off, n uint64, crc uint32, what func() string) ([]byte, error) {
	defer r.db.st.spanReadLatency.timer()()
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.released {
		return nil, fmt.Errorf("%w: span memory %q: reader was released", ErrClosed, r.name)
	}
	return r.blocks.Read(dst, off, n, crc, what)
}

// spanCounters counts span block reads in the DB's statistics.
type spanCounters struct{ st *counters }

func (c spanCounters) Read(n uint64)     { c.st.bytesRead.Add(n) }
func (c spanCounters) Verified(n uint64) { c.st.verifiedBytes.Add(n) }
func (c spanCounters) Corrupt()          { c.st.corruptions.Add(1) }
