package tier

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
)

// Header describes one packet in the tier: everything store.Put needs
// besides the payload, and how the payload is cut into parts. It is the
// "header" object, written after every part, so a reader that finds it
// finds parts it can check.
type Header struct {
	// PacketDesc and CodecOptions are the store.Packet's, as Push was
	// given them.
	format.PacketDesc
	CodecOptions codec.Options
	// ChunkLen is the bytes of one layer's K (or V) as the caller gave
	// them: [kv_heads][tokens][head_dim] of the model's dtype.
	ChunkLen uint64
	// PartSize is the bytes of every part but the last, which holds the
	// rest of the payload.
	PartSize uint32
	// Content is the payload's name: BLAKE3-128 of its bytes.
	Content Content
	// PartCRCs holds each part's CRC32C (format.CRC).
	PartCRCs []uint32
}

const (
	headerMagic   = "KVTH"
	headerVersion = 1
	headerFixed   = 16 // magic, version, zero, body length, body CRC
	// MaxHeaderBytes bounds a header object a reader accepts (token ids
	// dominate: 4 bytes each).
	MaxHeaderBytes = 64 << 20
	minPartSize    = 4 << 10
	maxPartSize    = 1 << 30
)

// PayloadLen is the payload's bytes: K then V of every layer, in order.
func (h *Header) PayloadLen() uint64 { return 2 * uint64(h.Model.Layers) * h.ChunkLen }

// Parts is the number of parts the payload is cut into.
func (h *Header) Parts() int { return partCount(h.PayloadLen(), h.PartSize) }

func partCount(n uint64, size uint32) int { return int((n + uint64(size) - 1) / uint64(size)) }

// part returns part i's byte range in the payload.
func (h *Header) part(i int) (off, n uint64) {
	off = uint64(i) * uint64(h.PartSize)
	return off, min(uint64(h.PartSize), h.PayloadLen()-off)
}

// Encode returns the header object's bytes.
func (h *Header) Encode() ([]byte, error) {
	spec, err := format.EncodeModelSpec(h.Model)
	if err != nil {
		return nil, err
	}
	opts, err := json.Marshal(h.CodecOptions)
	if err != nil {
		return nil, fmt.Errorf("%w: tier header: codec options: %v", ErrInvalidArgument, err)
	}
	b := make([]byte, headerFixed, headerFixed+256+len(spec)+4*len(h.TokenIDs)+4*len(h.PartCRCs))
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	blob := func(s []byte) { u32(uint32(len(s))); b = append(b, s...) }
	blob([]byte(h.Namespace))
	blob(spec)
	blob([]byte(h.AdapterID))
	u32(uint32(h.HeaderTokens))
	u32(uint32(h.TrailerTokens))
	u64(uint64(h.BasePosition))
	u32(uint32(len(h.TokenIDs)))
	for _, t := range h.TokenIDs {
		u32(t)
	}
	b = append(b, byte(h.Codec))
	blob(opts)
	u64(h.ChunkLen)
	u32(h.PartSize)
	b = append(b, h.Content[:]...)
	u32(uint32(len(h.PartCRCs)))
	for _, c := range h.PartCRCs {
		u32(c)
	}
	copy(b, headerMagic)
	binary.LittleEndian.PutUint16(b[4:], headerVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-headerFixed))
	binary.LittleEndian.PutUint32(b[12:], format.CRC(b[headerFixed:]))
	if len(b) > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: tier header of %d bytes exceeds %d", ErrInvalidArgument, len(b), MaxHeaderBytes)
	}
	return b, nil
}

// DecodeHeader checks and decodes a header object: magic, version, length
// and CRC32C first, then every field with bounds, then the header's own
// consistency (Check). Bad bytes are ErrCorruption; it never panics on
// any input (FuzzDecodeHeader).
func DecodeHeader(b []byte) (*Header, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tier header: %s", ErrCorruption, fmt.Sprintf(f, args...))
	}
	switch {
	case len(b) < headerFixed:
		return nil, bad("%d bytes, shorter than its %d-byte frame", len(b), headerFixed)
	case string(b[:4]) != headerMagic:
		return nil, bad("magic %q, want %q", b[:4], headerMagic)
	case binary.LittleEndian.Uint16(b[4:]) != headerVersion:
		return nil, fmt.Errorf("%w: tier header version %d, this build reads %d", format.ErrVersion, binary.LittleEndian.Uint16(b[4:]), headerVersion)
	case binary.LittleEndian.Uint16(b[6:]) != 0:
		return nil, bad("reserved field %#x, want 0", binary.LittleEndian.Uint16(b[6:]))
	case uint64(binary.LittleEndian.Uint32(b[8:])) != uint64(len(b)-headerFixed):
		return nil, bad("body length %d, object holds %d", binary.LittleEndian.Uint32(b[8:]), len(b)-headerFixed)
	case binary.LittleEndian.Uint32(b[12:]) != format.CRC(b[headerFixed:]):
		return nil, bad("CRC32C %08x, body has %08x", binary.LittleEndian.Uint32(b[12:]), format.CRC(b[headerFixed:]))
	}
	r := reader{b: b[headerFixed:]}
	h := &Header{PacketDesc: format.PacketDesc{Namespace: string(r.blob()), AdapterID: ""}}
	spec := r.blob()
	h.AdapterID = string(r.blob())
	h.HeaderTokens, h.TrailerTokens = int(r.u32()), int(r.u32())
	base := r.u64()
	n := r.u32()
	if r.err == nil && uint64(n)*4 > uint64(len(r.b)) {
		return nil, bad("%d token ids in %d bytes", n, len(r.b))
	}
	h.TokenIDs = make([]uint32, 0, min(n, uint32(len(r.b)/4)))
	for range n {
		h.TokenIDs = append(h.TokenIDs, r.u32())
	}
	h.Codec = format.Codec(r.byte())
	opts := r.blob()
	h.ChunkLen = r.u64()
	h.PartSize = r.u32()
	copy(h.Content[:], r.next(len(h.Content)))
	parts := r.u32()
	if r.err == nil && uint64(parts)*4 != uint64(len(r.b)) {
		return nil, bad("%d part CRCs in %d bytes", parts, len(r.b))
	}
	for range parts {
		h.PartCRCs = append(h.PartCRCs, r.u32())
	}
	if r.err != nil {
		return nil, bad("%v", r.err)
	}
	if base > math.MaxInt32 {
		return nil, bad("base position %d", base)
	}
	h.BasePosition = int(base)
	m, err := format.DecodeModelSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: tier header: model spec: %w", ErrCorruption, err)
	}
	h.Model = m
	if err := json.Unmarshal(opts, &h.CodecOptions); err != nil {
		return nil, bad("codec options: %v", err)
	}
	if err := h.Check(); err != nil {
		return nil, err
	}
	return h, nil
}

// Check verifies the header's own consistency: a known codec, a chunk
// length equal to the model's [kv_heads][tokens][head_dim], a part size
// in range and one CRC per part. It is ErrCorruption otherwise.
func (h *Header) Check() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tier header of namespace %q: %s", ErrCorruption, h.Namespace, fmt.Sprintf(f, args...))
	}
	m := h.Model
	tokens := uint64(h.HeaderTokens) + uint64(len(h.TokenIDs)) + uint64(h.TrailerTokens)
	want := uint64(m.KVHeads) * tokens * uint64(m.HeadDim) * uint64(m.DType.Size())
	switch {
	case !h.Codec.Valid():
		return bad("codec %d", h.Codec)
	case tokens == 0 || tokens > math.MaxUint32:
		return bad("%d tokens", tokens)
	case h.ChunkLen != want:
		return bad("chunk length %d, model and tokens give %d", h.ChunkLen, want)
	case h.PartSize < minPartSize || h.PartSize > maxPartSize:
		return bad("part size %d outside [%d, %d]", h.PartSize, minPartSize, maxPartSize)
	case len(h.PartCRCs) != h.Parts():
		return bad("%d part CRCs for %d parts", len(h.PartCRCs), h.Parts())
	}
	return nil
}

// Matches checks that the header is the one for key (ns, fp, id): its
// namespace, its model's fingerprint, and the id computed from its fields.
// A header copied to another key is ErrCorruption.
func (h *Header) Matches(ns string, fp format.Fingerprint, id format.PacketID) error {
	got := format.ComputePacketID(h.Namespace, h.Model.Fingerprint(), h.AdapterID, h.TokenIDs)
	switch {
	case h.Namespace != ns:
		return fmt.Errorf("%w: tier header under namespace %q names namespace %q", ErrCorruption, ns, h.Namespace)
	case h.Model.Fingerprint() != fp:
		return fmt.Errorf("%w: tier header under model %s holds model %s", ErrCorruption, fp.Short(), h.Model.Fingerprint().Short())
	case got != id:
		return fmt.Errorf("%w: tier header under packet %s describes packet %s", ErrCorruption, id.Short(), got.Short())
	}
	return nil
}

// reader reads little-endian fields, remembering the first overrun.
type reader struct {
	b   []byte
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n > len(r.b) {
		if r.err == nil {
			r.err = fmt.Errorf("field of %d bytes past the end (%d left)", n, len(r.b))
		}
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte  { return r.next(1)[0] }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }
func (r *reader) blob() []byte {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)) {
		r.err = fmt.Errorf("field of %d bytes past the end (%d left)", n, len(r.b))
		return nil
	}
	return r.next(int(n))
}
