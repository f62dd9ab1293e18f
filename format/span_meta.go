package format

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// Span memory records, catalog values of kind "KVSP", one root (SpanMeta)
// per context and one HeadMeta per (layer, KV head). Bodies are little
// endian; the first byte says which of the two a body is.
//
// SpanMeta body: 200 fixed bytes, then the variable parts in this order.
//
//	+------+---------+---------+-------+----------+------------+--------+---------+---------+---------+
//	| 0 u8 | 1 u8    | 2 u8    | 3 u8  | 4        | 36         | 68     | 72      | 74      | 76      |
//	| type | resident| factor  | flags | model fp | context id | tokens | layers  | kv heads| head dim|
//	| = 1  | dtype   | dtype   | = 0   | 32       | 32         | u32    | u16     | u16     | u16     |
//	+------+---------+---------+-------+----------+------------+--------+---------+---------+---------+
//	| 78 proj dim u16 | 80 base position i64 | 88 blob file u32 | 92 reserved u32 = 0            |
//	| 96 extent offset u64 | 104 extent length u64 | 112 created unix ns i64                        |
//	| 120 spans u32 | 124 resident rows u32 | 128 anchors u32 | 132 W name len u16 | 134 u16 = 0   |
//	| 136 W data BLAKE3 (32) | 168 mean f64 | 176 std f64 | 184 threshold f64 | 192 anchor thr f64  |
//	+------------------------------------------------------------------------------------------------+
//	spans     x 12: start u32, length u32, flags u32 (bit 0: factored)
//	resident  x 4:  token index u32, ascending (anchors and unfactored spans' tokens)
//	anchors   x 4:  token index u32, ascending, a subset of resident
//	layers    x 32: K offset u64, V offset u64, length u64, K crc32c u32, V crc32c u32
//	W name    (the artifact the projected summary keys were made with)
//
// HeadMeta body: 64 fixed bytes, then one 40-byte entry per span, then the
// summaries.
//
//	+------+--------+----------+-------+------+----------+----------+-------+------------+-----------+----------+---------------+
//	| 0 u8 | 1 u8   | 2 u16    | 4 u16 | 6 u16| 8 u16    | 10 u16   | 12 u32| 16         | 48 u32    | 52 u32   | 56 u64        |
//	| type | factor | reserved | layer | head | head dim | proj dim | spans | context id | blob file | reserved | extent offset |
//	| = 2  | dtype  | = 0      |       |      |          |          |       | 32         |           | = 0      |               |
//	+------+--------+----------+-------+------+----------+----------+-------+------------+-----------+----------+---------------+
//	spans x 40: K offset u64, V offset u64, K length u32, V length u32,
//	            K crc32c u32, V crc32c u32, K rank u16, V rank u16, reserved u32 = 0
//	            (all zero for a span that is not factored)
//	spans x (2*head dim + proj dim) f32: summary key, summary value, projected key
//
// Offsets are relative to the extent's start. A HeadMeta repeats the
// context id, blob file and extent offset of its SpanMeta, so that a head
// record of an older or newer write of the same context is never paired
// with the wrong root.
var KindSpan = RegisterKind(RecordKind{
	Name: "span memory record", Magic: MagicOf("KVSP"), Version: 1, MaxBody: 64 << 20,
})

// ContextID identifies one stored span memory: BLAKE3-256 over (namespace,
// model fingerprint, context name) (ComputeContextID). It is what
// the extent trailer names.
type ContextID [32]byte

// ComputeContextID derives a span memory's id: scopedIDHash of (namespace,
// model, name) and nothing after. Variable-length fields are
// length-prefixed so that no two inputs share an encoding.
func ComputeContextID(namespace string, model Fingerprint, name string) ContextID {
	var id ContextID
	copy(id[:], scopedIDHash(contextIDDomain, namespace, model, name).Sum(nil))
	return id
}

func (c ContextID) String() string { return hex.EncodeToString(c[:]) }

// Short is the first 8 bytes in hex, for tables and logs.
func (c ContextID) Short() string { return hex.EncodeToString(c[:8]) }

// Span is one span of a segmented context as a span record stores it,
// field for field segment.Span: tokens [Start, End), factored or resident.
type Span struct {
	Start, End int
	Factored   bool
}

// Len is the number of tokens in the span.
func (s Span) Len() int { return s.End - s.Start }

// SpanSummary is one span's summary in a head record, field for field
// segment.Summary: Key and Value (HeadDim floats), Proj (ProjDim, nil when
// 0).
type SpanSummary struct {
	Key, Value []float32
	Proj       []float32
}

const (
	spanTypeMeta  = 1
	spanTypeHead  = 2
	spanMetaFixed = 200
	spanEntrySize = 12
	spanLayerSize = 32
	headFixed     = 64
	headEntrySize = 40
	spanFactored  = 1 << 0
)

// SpanMeta is the root record of a context's span memory: its shape, its
// segmentation, where its extent is, and where each layer's resident rows
// are in it. The reader checks everything a HeadMeta says against it.
type SpanMeta struct {
	Model   Fingerprint
	Context ContextID
	Tokens  int
	Layers  int
	KVHeads int
	HeadDim int
	// ProjDim is d', the length of the projected summary keys; 0 when the
	// memory has no routing projection.
	ProjDim       int
	ResidentDType DType // of the resident rows: the model's storage dtype
	FactorDType   DType
	// BasePosition is the position the context's row 0 had when the memory
	// was built; resident keys are stored rotated for local positions
	// 0..Tokens-1, as packets are.
	BasePosition  int64
	BlobFile      uint32
	ExtentOffset  uint64
	ExtentLength  uint64
	CreatedUnixNs int64
	Spans         []Span
	// Resident rows, ascending: every anchor and every token of a span that
	// is not factored. They are stored at full resolution.
	Resident []int
	Anchors  []int // ascending, a subset of Resident
	// Blocks holds, per layer, where the resident rows' K and V are.
	Blocks []ResidentBlock
	// Projection names the artifact W the projected summary keys were
	// made with, and ProjectionHash is the BLAKE3-256 of its data.
	Projection     string
	ProjectionHash [32]byte
	// Surprisal statistics of the segmentation (NaN when there were none).
	Mean, Std, Threshold, AnchorThreshold float64
}

// ResidentBlock locates one layer's resident rows: K and V each
// [kv_heads][resident][head_dim] in the resident dtype, keys post-RoPE at
// local positions, at offsets relative to the extent's start.
type ResidentBlock struct {
	KOffset, VOffset, Length uint64
	KCRC, VCRC               uint32
}

// FactorBlock locates one span's K or V factors in the extent: a factor
// encoding ("KVSF", factors.go), with its CRC32C.
type FactorBlock struct {
	Offset uint64 // relative to the extent's start
	Length uint32
	CRC    uint32
	Rank   int
}

// HeadMeta is the record of one (layer, KV head): each span's factor
// blocks and summary.
type HeadMeta struct {
	Layer, Head int
	// K and V per span; zero blocks for spans that are not factored.
	K, V []FactorBlock
	// Summaries per span: Key and Value (HeadDim), Proj (ProjDim, nil when
	// 0). They alias one array: do not append to them.
	Summaries []SpanSummary
}

// SpanMetaLen is the length of a framed SpanMeta (Encode) of spans spans,
// resident rows, anchors, layers and a W name of nameLen bytes.
func SpanMetaLen(spans, resident, anchors, layers, nameLen int) int {
	return FrameSize + spanMetaFixed + spanEntrySize*spans + 4*(resident+anchors) + spanLayerSize*layers + nameLen
}

// HeadMetaLen is the length of a framed HeadMeta (Encode) of spans spans
// with summaries of head dim headDim and projection dim projDim.
func HeadMetaLen(spans, headDim, projDim int) int {
	return FrameSize + headFixed + spans*HeadMetaSpanLen(headDim, projDim)
}

// HeadMetaSpanLen is what one span adds to a HeadMeta: its entry and its
// summary (2*headDim + projDim f32).
func HeadMetaSpanLen(headDim, projDim int) int { return headEntrySize + 4*(2*headDim+projDim) }

// SpanMetaSpanLen is what one span adds to a SpanMeta: its entry.
const SpanMetaSpanLen = spanEntrySize

// PayloadEnd is where the trailer starts: no block may reach past it.
func (m *SpanMeta) PayloadEnd() uint64 { return m.ExtentLength - TrailerSize }

// Encode returns the framed catalog value of m, which must be valid (see
// DecodeSpanMeta for what is checked); it is ErrInvalidArgument otherwise.
func (m *SpanMeta) Encode() ([]byte, error) {
	b := make([]byte, spanMetaFixed, spanMetaFixed+spanEntrySize*len(m.Spans)+4*(len(m.Resident)+len(m.Anchors))+spanLayerSize*len(m.Blocks)+len(m.Projection))
	le := binary.LittleEndian
	b[0], b[1], b[2] = spanTypeMeta, byte(m.ResidentDType), byte(m.FactorDType)
	copy(b[4:], m.Model[:])
	copy(b[36:], m.Context[:])
	le.PutUint32(b[68:], uint32(m.Tokens))
	le.PutUint16(b[72:], uint16(m.Layers))
	le.PutUint16(b[74:], uint16(m.KVHeads))
	le.PutUint16(b[76:], uint16(m.HeadDim))
	le.PutUint16(b[78:], uint16(m.ProjDim))
	le.PutUint64(b[80:], uint64(m.BasePosition))
	le.PutUint32(b[88:], m.BlobFile)
	le.PutUint64(b[96:], m.ExtentOffset)
	le.PutUint64(b[104:], m.ExtentLength)
	le.PutUint64(b[112:], uint64(m.CreatedUnixNs))
	le.PutUint32(b[120:], uint32(len(m.Spans)))
	le.PutUint32(b[124:], uint32(len(m.Resident)))
	le.PutUint32(b[128:], uint32(len(m.Anchors)))
	le.PutUint16(b[132:], uint16(len(m.Projection)))
	copy(b[136:], m.ProjectionHash[:])
	for i, f := range []float64{m.Mean, m.Std, m.Threshold, m.AnchorThreshold} {
		le.PutUint64(b[168+8*i:], math.Float64bits(f))
	}
	for _, s := range m.Spans {
		var flags uint32
		if s.Factored {
			flags = spanFactored
		}
		b = le.AppendUint32(le.AppendUint32(le.AppendUint32(b, uint32(s.Start)), uint32(s.Len())), flags)
	}
	for _, list := range [][]int{m.Resident, m.Anchors} {
		for _, t := range list {
			b = le.AppendUint32(b, uint32(t))
		}
	}
	for _, k := range m.Blocks {
		b = le.AppendUint64(le.AppendUint64(le.AppendUint64(b, k.KOffset), k.VOffset), k.Length)
		b = le.AppendUint32(le.AppendUint32(b, k.KCRC), k.VCRC)
	}
	b = append(b, m.Projection...)
	if _, err := decodeSpanMetaBody(b); err != nil {
		return nil, fmt.Errorf("%w: span meta: %v", ErrInvalidArgument, err)
	}
	return Seal(KindSpan, b)
}

// DecodeSpanMeta checks and parses a framed SpanMeta. Every count, offset
// and length is checked against the body's size and against each other
// before anything is allocated or indexed: bad bytes are ErrCorruption (or
// ErrVersion for a newer record), never a panic.
func DecodeSpanMeta(v []byte) (*SpanMeta, error) {
	body, err := Unseal(KindSpan, v)
	if err != nil {
		return nil, err
	}
	m, err := decodeSpanMetaBody(body)
	if err != nil {
		return nil, fmt.Errorf("%w: span meta: %v", ErrCorruption, err)
	}
	return m, nil
}

// decodeSpanMetaBody parses a SpanMeta body; its errors carry no sentinel.
func decodeSpanMetaBody(b []byte) (*SpanMeta, error) {
	if len(b) < spanMetaFixed {
		return nil, fmt.Errorf("%d bytes, shorter than the %d fixed ones", len(b), spanMetaFixed)
	}
	le := binary.LittleEndian
	if b[0] != spanTypeMeta || b[3] != 0 || le.Uint32(b[92:]) != 0 || le.Uint16(b[134:]) != 0 {
		return nil, fmt.Errorf("type %d, flags %#x or reserved fields not zero", b[0], b[3])
	}
	m := &SpanMeta{
		ResidentDType: DType(b[1]), FactorDType: DType(b[2]),
		Tokens: int(le.Uint32(b[68:])), Layers: int(le.Uint16(b[72:])), KVHeads: int(le.Uint16(b[74:])),
		HeadDim: int(le.Uint16(b[76:])), ProjDim: int(le.Uint16(b[78:])), BasePosition: int64(le.Uint64(b[80:])),
		BlobFile: le.Uint32(b[88:]), ExtentOffset: le.Uint64(b[96:]), ExtentLength: le.Uint64(b[104:]),
		CreatedUnixNs: int64(le.Uint64(b[112:])),
		Mean:          math.Float64frombits(le.Uint64(b[168:])), Std: math.Float64frombits(le.Uint64(b[176:])),
		Threshold: math.Float64frombits(le.Uint64(b[184:])), AnchorThreshold: math.Float64frombits(le.Uint64(b[192:])),
	}
	copy(m.Model[:], b[4:36])
	copy(m.Context[:], b[36:68])
	copy(m.ProjectionHash[:], b[136:168])
	spans, resident, anchors := uint64(le.Uint32(b[120:])), uint64(le.Uint32(b[124:])), uint64(le.Uint32(b[128:]))
	nameLen := uint64(le.Uint16(b[132:]))
	if err := m.checkShape(); err != nil {
		return nil, err
	}
	want := spanMetaFixed + spanEntrySize*spans + 4*(resident+anchors) + spanLayerSize*uint64(m.Layers) + nameLen
	switch {
	case uint64(len(b)) != want:
		return nil, fmt.Errorf("%d bytes, its counts (%d spans, %d resident, %d anchors, %d layers, name %d) need %d",
			len(b), spans, resident, anchors, m.Layers, nameLen, want)
	case spans == 0 || spans > uint64(m.Tokens) || resident > uint64(m.Tokens) || anchors > resident:
		return nil, fmt.Errorf("%d spans, %d resident rows, %d anchors for %d tokens", spans, resident, anchors, m.Tokens)
	case nameLen > MaxNameLen || (nameLen == 0) != (m.ProjDim == 0):
		return nil, fmt.Errorf("projection name of %d bytes for projection dim %d", nameLen, m.ProjDim)
	}
	off := spanMetaFixed
	m.Spans = make([]Span, spans)
	for i := range m.Spans {
		start, n, flags := le.Uint32(b[off:]), le.Uint32(b[off+4:]), le.Uint32(b[off+8:])
		if flags&^spanFactored != 0 || n == 0 || uint64(start)+uint64(n) > uint64(m.Tokens) {
			return nil, fmt.Errorf("span %d: start %d, length %d, flags %#x", i, start, n, flags)
		}
		m.Spans[i] = Span{Start: int(start), End: int(start + n), Factored: flags&spanFactored != 0}
		off += spanEntrySize
	}
	m.Resident, off = readIndices(b, off, int(resident))
	m.Anchors, off = readIndices(b, off, int(anchors))
	m.Blocks = make([]ResidentBlock, m.Layers)
	for l := range m.Blocks {
		m.Blocks[l] = ResidentBlock{KOffset: le.Uint64(b[off:]), VOffset: le.Uint64(b[off+8:]), Length: le.Uint64(b[off+16:]),
			KCRC: le.Uint32(b[off+24:]), VCRC: le.Uint32(b[off+28:])}
		off += spanLayerSize
	}
	m.Projection = string(b[off:])
	if err := m.checkRows(); err != nil {
		return nil, err
	}
	return m, nil
}

func readIndices(b []byte, off, n int) ([]int, int) {
	out := make([]int, n)
	for i := range out {
		out[i] = int(binary.LittleEndian.Uint32(b[off:]))
		off += 4
	}
	return out, off
}

// checkShape checks the fixed fields: dimensions, dtypes and the extent.
func (m *SpanMeta) checkShape() error {
	switch {
	case !m.ResidentDType.Float() || !m.FactorDType.Float():
		return fmt.Errorf("resident dtype %v, factor dtype %v", m.ResidentDType, m.FactorDType)
	case m.Layers < 1 || m.Layers > MaxLayers || m.KVHeads < 1 || m.KVHeads > MaxKVHeads ||
		m.HeadDim < 1 || m.HeadDim > MaxHeadDim || m.ProjDim > m.HeadDim:
		return fmt.Errorf("%d layers, %d kv heads, head dim %d, projection dim %d", m.Layers, m.KVHeads, m.HeadDim, m.ProjDim)
	case m.Tokens < 1 || m.BasePosition < 0 || m.BasePosition > math.MaxInt64-int64(m.Tokens):
		return fmt.Errorf("%d tokens at base position %d", m.Tokens, m.BasePosition)
	case m.ExtentOffset < BlobHeaderSize || m.ExtentOffset%Alignment != 0 ||
		m.ExtentLength < Alignment || m.ExtentLength%Alignment != 0 || m.ExtentOffset+m.ExtentLength < m.ExtentOffset:
		return fmt.Errorf("extent [%d, +%d) not 4 KiB aligned after the blob header", m.ExtentOffset, m.ExtentLength)
	}
	return nil
}

// checkRows checks that the spans tile the context, that the resident rows
// and anchors are ascending, that the resident rows hold every anchor and
// every token of an unfactored span, and that each layer's block fits.
func (m *SpanMeta) checkRows() error {
	next := 0
	for i, s := range m.Spans {
		if s.Start != next {
			return fmt.Errorf("span %d starts at %d, want %d", i, s.Start, next)
		}
		next = s.End
	}
	if next != m.Tokens {
		return fmt.Errorf("spans end at %d of %d tokens", next, m.Tokens)
	}
	if err := ascending(m.Resident, m.Tokens); err != nil {
		return fmt.Errorf("resident rows: %v", err)
	}
	if err := ascending(m.Anchors, m.Tokens); err != nil {
		return fmt.Errorf("anchors: %v", err)
	}
	if !subset(m.Anchors, m.Resident) {
		return fmt.Errorf("an anchor is not a resident row")
	}
	if err := m.checkUnfactored(); err != nil {
		return err
	}
	return m.checkBlocks()
}

// checkUnfactored checks that every token of an unfactored span is resident.
func (m *SpanMeta) checkUnfactored() error {
	r := 0
	for i, s := range m.Spans {
		if s.Factored {
			continue
		}
		for t := s.Start; t < s.End; t++ {
			for r < len(m.Resident) && m.Resident[r] < t {
				r++
			}
			if r == len(m.Resident) || m.Resident[r] != t {
				return fmt.Errorf("token %d of unfactored span %d is not resident", t, i)
			}
		}
	}
	return nil
}

// checkBlocks checks each layer's resident block against the extent.
func (m *SpanMeta) checkBlocks() error {
	want := uint64(m.KVHeads) * uint64(len(m.Resident)) * uint64(m.HeadDim) * uint64(m.ResidentDType.Size())
	for l, k := range m.Blocks {
		if k.Length != want {
			return fmt.Errorf("layer %d: resident block of %d bytes, want %d", l, k.Length, want)
		}
		if err := m.checkBlock(k.KOffset, k.Length); err != nil {
			return fmt.Errorf("layer %d K: %v", l, err)
		}
		if err := m.checkBlock(k.VOffset, k.Length); err != nil {
			return fmt.Errorf("layer %d V: %v", l, err)
		}
		if k.Length > 0 && k.KOffset < k.VOffset+k.Length && k.VOffset < k.KOffset+k.Length {
			return fmt.Errorf("layer %d: K and V blocks overlap", l)
		}
	}
	return nil
}

// checkBlock checks that [off, off+n) is ChunkAlignment aligned and ends
// before the extent's trailer.
func (m *SpanMeta) checkBlock(off, n uint64) error {
	if off%ChunkAlignment != 0 || off > m.PayloadEnd() || n > m.PayloadEnd()-off {
		return fmt.Errorf("block [%d, +%d) not aligned or past the payload's %d bytes", off, n, m.PayloadEnd())
	}
	return nil
}

func ascending(x []int, limit int) error {
	for i, t := range x {
		if t >= limit || (i > 0 && t <= x[i-1]) {
			return fmt.Errorf("index %d (%d) not ascending below %d", i, t, limit)
		}
	}
	return nil
}

// subset reports whether every element of a (ascending) is in b (ascending).
func subset(a, b []int) bool {
	j := 0
	for _, t := range a {
		for j < len(b) && b[j] < t {
			j++
		}
		if j == len(b) || b[j] != t {
			return false
		}
	}
	return true
}
