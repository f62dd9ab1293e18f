package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Encode returns the framed catalog value of h, a head of memory m. h must
// be valid against m (see DecodeHeadMeta); it is ErrInvalidArgument
// otherwise.
func (h *HeadMeta) Encode(m *SpanMeta) ([]byte, error) {
	spans := len(m.Spans)
	if len(h.K) != spans || len(h.V) != spans || len(h.Summaries) != spans {
		return nil, fmt.Errorf("%w: head meta: %d K, %d V blocks and %d summaries for %d spans",
			ErrInvalidArgument, len(h.K), len(h.V), len(h.Summaries), spans)
	}
	row := 2*m.HeadDim + m.ProjDim
	b := make([]byte, headFixed, headFixed+spans*(headEntrySize+4*row))
	le := binary.LittleEndian
	b[0], b[1] = spanTypeHead, byte(m.FactorDType)
	le.PutUint16(b[4:], uint16(h.Layer))
	le.PutUint16(b[6:], uint16(h.Head))
	le.PutUint16(b[8:], uint16(m.HeadDim))
	le.PutUint16(b[10:], uint16(m.ProjDim))
	le.PutUint32(b[12:], uint32(spans))
	copy(b[16:], m.Context[:])
	le.PutUint32(b[48:], m.BlobFile)
	le.PutUint64(b[56:], m.ExtentOffset)
	for s := range spans {
		k, v := h.K[s], h.V[s]
		b = le.AppendUint64(le.AppendUint64(b, k.Offset), v.Offset)
		b = le.AppendUint32(le.AppendUint32(b, k.Length), v.Length)
		b = le.AppendUint32(le.AppendUint32(b, k.CRC), v.CRC)
		b = le.AppendUint16(le.AppendUint16(b, uint16(k.Rank)), uint16(v.Rank))
		b = le.AppendUint32(b, 0)
	}
	for s, sum := range h.Summaries {
		if len(sum.Key) != m.HeadDim || len(sum.Value) != m.HeadDim || len(sum.Proj) != m.ProjDim {
			return nil, fmt.Errorf("%w: head meta: summary %d has %d, %d, %d floats, want %d, %d, %d",
				ErrInvalidArgument, s, len(sum.Key), len(sum.Value), len(sum.Proj), m.HeadDim, m.HeadDim, m.ProjDim)
		}
		for _, part := range [][]float32{sum.Key, sum.Value, sum.Proj} {
			for _, f := range part {
				b = le.AppendUint32(b, math.Float32bits(f))
			}
		}
	}
	if _, err := decodeHeadMetaBody(b, m); err != nil {
		return nil, fmt.Errorf("%w: head meta: %v", ErrInvalidArgument, err)
	}
	return Seal(KindSpan, b)
}

// ErrOtherWrite marks a head record of another write of the same context:
// the memory was replaced after its root was read. DecodeHeadMeta wraps it
// in ErrCorruption.
var ErrOtherWrite = errors.New("record belongs to another write of the context")

// DecodeHeadMeta checks and parses a framed HeadMeta of memory m (itself
// from DecodeSpanMeta): that it belongs to m (context, extent, shape), that
// each factored span's blocks have the exact length of their factor
// encoding and lie inside the extent's payload, that unfactored spans have
// none, and that every summary float is finite. Bad bytes are ErrCorruption,
// never a panic.
func DecodeHeadMeta(v []byte, m *SpanMeta) (*HeadMeta, error) {
	body, err := Unseal(KindSpan, v)
	if err != nil {
		return nil, err
	}
	h, err := decodeHeadMetaBody(body, m)
	if err != nil {
		return nil, fmt.Errorf("%w: head meta: %w", ErrCorruption, err)
	}
	return h, nil
}

// decodeHeadMetaBody parses a HeadMeta body; its errors carry no sentinel.
func decodeHeadMetaBody(b []byte, m *SpanMeta) (*HeadMeta, error) {
	if len(b) < headFixed {
		return nil, fmt.Errorf("%d bytes, shorter than the %d fixed ones", len(b), headFixed)
	}
	le := binary.LittleEndian
	h := &HeadMeta{Layer: int(le.Uint16(b[4:])), Head: int(le.Uint16(b[6:]))}
	spans := uint64(le.Uint32(b[12:]))
	row := uint64(2*m.HeadDim + m.ProjDim)
	switch {
	case b[0] != spanTypeHead || le.Uint16(b[2:]) != 0 || le.Uint32(b[52:]) != 0:
		return nil, fmt.Errorf("type %d or reserved fields not zero", b[0])
	case b[1] != byte(m.FactorDType) || int(le.Uint16(b[8:])) != m.HeadDim || int(le.Uint16(b[10:])) != m.ProjDim:
		return nil, fmt.Errorf("factor dtype %d, head dim %d, projection dim %d; the memory has %v, %d, %d",
			b[1], le.Uint16(b[8:]), le.Uint16(b[10:]), m.FactorDType, m.HeadDim, m.ProjDim)
	case h.Layer >= m.Layers || h.Head >= m.KVHeads || spans != uint64(len(m.Spans)):
		return nil, fmt.Errorf("layer %d, head %d, %d spans of a %dx%d memory with %d spans", h.Layer, h.Head, spans, m.Layers, m.KVHeads, len(m.Spans))
	case [32]byte(b[16:48]) != m.Context || le.Uint32(b[48:]) != m.BlobFile || le.Uint64(b[56:]) != m.ExtentOffset:
		return nil, fmt.Errorf("%w (file %d, offset %d)", ErrOtherWrite, le.Uint32(b[48:]), le.Uint64(b[56:]))
	case uint64(len(b)) != headFixed+spans*(headEntrySize+4*row):
		return nil, fmt.Errorf("%d bytes, %d spans need %d", len(b), spans, headFixed+spans*(headEntrySize+4*row))
	}
	if err := h.decodeBlocks(b[headFixed:], m); err != nil {
		return nil, err
	}
	return h, h.decodeSummaries(b[headFixed+int(spans)*headEntrySize:], m)
}

// decodeBlocks parses and checks the per-span factor blocks.
func (h *HeadMeta) decodeBlocks(b []byte, m *SpanMeta) error {
	le := binary.LittleEndian
	h.K, h.V = make([]FactorBlock, len(m.Spans)), make([]FactorBlock, len(m.Spans))
	for s, sp := range m.Spans {
		e := b[s*headEntrySize:]
		k := FactorBlock{Offset: le.Uint64(e), Length: le.Uint32(e[16:]), CRC: le.Uint32(e[24:]), Rank: int(le.Uint16(e[32:]))}
		v := FactorBlock{Offset: le.Uint64(e[8:]), Length: le.Uint32(e[20:]), CRC: le.Uint32(e[28:]), Rank: int(le.Uint16(e[34:]))}
		if le.Uint32(e[36:]) != 0 {
			return fmt.Errorf("span %d: reserved field not zero", s)
		}
		if !sp.Factored {
			if k != (FactorBlock{}) || v != (FactorBlock{}) {
				return fmt.Errorf("span %d is not factored but has factor blocks", s)
			}
			continue
		}
		for _, f := range []struct {
			name string
			blk  FactorBlock
		}{{"K", k}, {"V", v}} {
			if err := m.checkFactorBlock(f.blk, sp.Len()); err != nil {
				return fmt.Errorf("span %d %s: %v", s, f.name, err)
			}
		}
		h.K[s], h.V[s] = k, v
	}
	return nil
}

// checkFactorBlock checks that a block has the length of a factor encoding
// of a rows x HeadDim span at its rank and lies inside the payload.
func (m *SpanMeta) checkFactorBlock(f FactorBlock, rows int) error {
	if f.Rank > min(rows, m.HeadDim) {
		return fmt.Errorf("rank %d for %dx%d", f.Rank, rows, m.HeadDim)
	}
	want := FactorLayout{Rows: rows, Cols: m.HeadDim, Rank: f.Rank, DType: m.FactorDType}.Size()
	if uint64(f.Length) != uint64(want) {
		return fmt.Errorf("%d bytes, rank %d factors of %dx%d in %v take %d", f.Length, f.Rank, rows, m.HeadDim, m.FactorDType, want)
	}
	return m.checkBlock(f.Offset, uint64(f.Length))
}

// decodeSummaries parses the summaries (their length already checked).
func (h *HeadMeta) decodeSummaries(b []byte, m *SpanMeta) error {
	row := 2*m.HeadDim + m.ProjDim
	all := make([]float32, len(m.Spans)*row)
	for i := range all {
		all[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(all[i])) || math.IsInf(float64(all[i]), 0) {
			return fmt.Errorf("summary float %d is %v", i, all[i])
		}
	}
	h.Summaries = make([]SpanSummary, len(m.Spans))
	for s := range h.Summaries {
		r := all[s*row : (s+1)*row : (s+1)*row]
		h.Summaries[s] = SpanSummary{Key: r[:m.HeadDim:m.HeadDim], Value: r[m.HeadDim : 2*m.HeadDim : 2*m.HeadDim]}
		if m.ProjDim > 0 {
			h.Summaries[s].Proj = r[2*m.HeadDim:]
		}
	}
	return nil
}
