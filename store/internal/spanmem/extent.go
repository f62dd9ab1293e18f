package spanmem

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// A span memory's extent is laid out like a packet's (4 KiB aligned, blocks
// ChunkAlignment aligned, zero padding, the 64-byte trailer naming the
// context id at its end), with blocks of two kinds:
//
//	| L0 resident K | L0 resident V | L1 ... | (l0,h0,s0) K factors | V factors | (l0,h0,s1) K | ... | pad | trailer |
//
// Resident blocks are [kv_heads][resident][head_dim] in the model's dtype;
// factor blocks are "KVSF" factor encodings (format/factors.go), one per (layer,
// KV head, factored span) and K|V, layer-major, then head, then span. Each
// block has its own CRC32C in the catalog, so that one span of one head is
// read and verified alone.
type Extent struct {
	buf     []byte // the payload: every block and the padding between them
	Length  uint64 // of the whole extent
	created int64
	blocks  []format.ResidentBlock // per layer
	k, v    [][]format.FactorBlock // per (layer, KV head), per span
}

// LayoutExtent encodes m's blocks into one payload buffer.
func LayoutExtent(m *Memory) (*Extent, error) {
	e := &Extent{blocks: make([]format.ResidentBlock, m.Model.Layers), created: time.Now().UnixNano()}
	for l := range e.blocks {
		kOff := e.place(m.ResidentK[l])
		vOff := e.place(m.ResidentV[l])
		e.blocks[l] = format.ResidentBlock{KOffset: kOff, VOffset: vOff, Length: uint64(len(m.ResidentK[l])),
			KCRC: format.CRC(m.ResidentK[l]), VCRC: format.CRC(m.ResidentV[l])}
	}
	e.k, e.v = make([][]format.FactorBlock, len(m.Heads)), make([][]format.FactorBlock, len(m.Heads))
	for g, h := range m.Heads {
		e.k[g], e.v[g] = make([]format.FactorBlock, len(h.K)), make([]format.FactorBlock, len(h.V))
		for s := range h.K {
			if h.K[s] == nil {
				continue
			}
			var err error
			if e.k[g][s], err = e.factors(h.K[s], m.FactorDType); err != nil {
				return nil, fmt.Errorf("span memory: layer %d head %d span %d K: %w", g/m.Model.KVHeads, g%m.Model.KVHeads, s, err)
			}
			if e.v[g][s], err = e.factors(h.V[s], m.FactorDType); err != nil {
				return nil, fmt.Errorf("span memory: layer %d head %d span %d V: %w", g/m.Model.KVHeads, g%m.Model.KVHeads, s, err)
			}
		}
	}
	n, ok := format.ExtentLength(uint64(len(e.buf)))
	if !ok {
		return nil, fmt.Errorf("%w: span extent of %d bytes overflows", ErrInvalidArgument, len(e.buf))
	}
	e.Length = n
	return e, nil
}

// align pads the payload to ChunkAlignment and returns the offset.
func (e *Extent) align() uint64 {
	for len(e.buf)%format.ChunkAlignment != 0 {
		e.buf = append(e.buf, 0)
	}
	return uint64(len(e.buf))
}

// place appends b at the next aligned offset and returns it.
func (e *Extent) place(b []byte) uint64 {
	off := e.align()
	e.buf = append(e.buf, b...)
	return off
}

// factors appends the encoding of f and describes it.
func (e *Extent) factors(f *reconstruct.Factors, dt format.DType) (format.FactorBlock, error) {
	off := e.align()
	var err error
	if e.buf, err = reconstruct.AppendFactors(e.buf, f, dt); err != nil {
		return format.FactorBlock{}, err
	}
	b := e.buf[off:]
	return format.FactorBlock{Offset: off, Length: uint32(len(b)), CRC: format.CRC(b), Rank: f.Rank}, nil
}

// Write writes the extent at off of f: the payload, then zeroes and the
// trailer, every byte of the extent.
func (e *Extent) Write(f vfs.File, name string, off uint64, id format.ContextID) error {
	if err := bloblog.WriteAt(f, name, e.buf, off); err != nil {
		return err
	}
	payload := uint64(len(e.buf))
	tail := make([]byte, e.Length-payload)
	t := format.Trailer{Packet: format.PacketID(id), Offset: off, PayloadLen: payload, PayloadCRC: format.CRC(e.buf)}
	copy(tail[len(tail)-format.TrailerSize:], t.Encode())
	return bloblog.WriteAt(f, name, tail, off+payload)
}

// Meta is the root record of m written at off of blob file num.
func (e *Extent) Meta(m *Memory, id format.ContextID, num uint32, off uint64) *format.SpanMeta {
	seg := m.Segmentation
	return &format.SpanMeta{
		Model: m.Model.Fingerprint(), Context: id, Tokens: m.Tokens,
		Layers: m.Model.Layers, KVHeads: m.Model.KVHeads, HeadDim: m.Model.HeadDim, ProjDim: m.Projection.Dim,
		ResidentDType: m.Model.DType, FactorDType: m.FactorDType, BasePosition: m.BasePosition,
		BlobFile: num, ExtentOffset: off, ExtentLength: e.Length, CreatedUnixNs: e.created,
		Spans: recordSpans(seg.Spans), Resident: m.Resident, Anchors: seg.Anchors, Blocks: e.blocks,
		Projection: m.Projection.Name, ProjectionHash: m.Projection.Hash,
		Mean: seg.Mean, Std: seg.Std, Threshold: seg.Threshold, AnchorThreshold: seg.AnchorThreshold,
	}
}

// Head is the record of group g (layer-major) of m.
func (e *Extent) Head(m *Memory, g int) *format.HeadMeta {
	return &format.HeadMeta{Layer: g / m.Model.KVHeads, Head: g % m.Model.KVHeads, K: e.k[g], V: e.v[g], Summaries: recordSummaries(m.Heads[g].Summaries)}
}

// recordSpans is spans as a root record holds them.
func recordSpans(spans []segment.Span) []format.Span {
	out := make([]format.Span, len(spans))
	for i, s := range spans {
		out[i] = format.Span(s)
	}
	return out
}

// recordSummaries is sums as a head record holds them (the floats shared).
func recordSummaries(sums []segment.Summary) []format.SpanSummary {
	out := make([]format.SpanSummary, len(sums))
	for i, s := range sums {
		out[i] = format.SpanSummary(s)
	}
	return out
}

// SegmentSummaries is the inverse of recordSummaries.
func SegmentSummaries(sums []format.SpanSummary) []segment.Summary {
	out := make([]segment.Summary, len(sums))
	for i, s := range sums {
		out[i] = segment.Summary(s)
	}
	return out
}
