package format

import (
	"encoding/binary"
	"fmt"
)

// A put record leads every packet extent written since format 1.1: the
// catalog entries of the packet, so that the catalog can be rebuilt from
// the blob log (docs/format.md, "Rebuilding the catalog"). It is a framed
// record of kind "KVPR" at the extent's first byte, zero padded to
// ChunkAlignment; chunk 0 follows it. The trailer's payload CRC covers it
// like the chunks. Its body, little endian:
//
//	+---------+------------+----------+------------+-----------+--------------+------------+--------------+
//	| seq u64 | header len | spec len | chunks u32 | reserved  | header       | model spec | chunk crc32c |
//	|         | u32        | u32      |            | u32, 0    | (KVPH value) | (KVMS val.)| u32 x chunks |
//	+---------+------------+----------+------------+-----------+--------------+------------+--------------+
//	0         8            12         16           20          24
//
// seq orders the store's put records and tombstones (the latest record of
// a packet id wins). The header is the catalog's packet header value with
// every chunk's CRC32C zeroed, since the record's size must be known before
// the chunks are written and a FlatBuffer omits zero fields; the CRCs
// follow it, one per chunk in header order. The header's BlobFile,
// ExtentOffset and chunk offsets are where the extent was first written:
// compaction copies an extent whole, so a reader takes the extent's
// position from where it found it (the trailer's offset) and repoints.
//
// The catalog's next record sequence (kind "KVRS", under key 's' |
// "next-record") has an 8-byte body: the seq the next record gets, u64 LE.
var (
	KindPutRecord = RegisterKind(RecordKind{
		Name: "put record", Magic: MagicOf("KVPR"), Version: 1, MaxBody: 128 << 20,
	})
	KindRecordSeq = RegisterKind(RecordKind{
		Name: "record sequence", Magic: MagicOf("KVRS"), Version: 1, MaxBody: 1 << 10,
	})
)

const putRecordFixed = 24

// PutRecord is a decoded put record: the packet's header, CRCs included,
// and its model's spec.
type PutRecord struct {
	Seq    uint64
	Header *PacketHeader
	Spec   *ModelSpec
}

// EncodePutRecord returns the framed put record of h (whose chunk CRCs are
// kept apart) and m, the spec h.Model fingerprints. Its length depends
// only on which of h's fields are zero, never on the CRC values, so
// PutRecordSize of the same header with other CRCs, offsets or lengths
// (all non-zero) gives the same number.
func EncodePutRecord(seq uint64, h *PacketHeader, m *ModelSpec) ([]byte, error) {
	if m.Fingerprint() != h.Model {
		return nil, fmt.Errorf("%w: put record of %s: spec is not the header's model", ErrInvalidArgument, h.ID.Short())
	}
	z := *h
	z.Chunks = make([]ChunkDesc, len(h.Chunks))
	for i, c := range h.Chunks {
		c.CRC32C = 0
		z.Chunks[i] = c
	}
	hv, err := EncodeHeader(&z)
	if err != nil {
		return nil, err
	}
	sv, err := EncodeModelSpec(m)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	b := make([]byte, putRecordFixed, putRecordFixed+len(hv)+len(sv)+4*len(h.Chunks))
	le.PutUint64(b[0:], seq)
	le.PutUint32(b[8:], uint32(len(hv)))
	le.PutUint32(b[12:], uint32(len(sv)))
	le.PutUint32(b[16:], uint32(len(h.Chunks)))
	b = append(append(b, hv...), sv...)
	for _, c := range h.Chunks {
		b = le.AppendUint32(b, c.CRC32C)
	}
	return Seal(KindPutRecord, b)
}

// DecodePutRecord checks and parses a framed put record: the frame, the
// lengths, the header and spec values (each with its own frame and CRC),
// that the chunk count is the header's and the spec is the header's model.
// Bad bytes are ErrCorruption, a newer version ErrVersion; it never panics.
func DecodePutRecord(v []byte) (*PutRecord, error) {
	b, err := Unseal(KindPutRecord, v)
	if err != nil {
		return nil, err
	}
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: put record: %s", ErrCorruption, fmt.Sprintf(f, args...))
	}
	if len(b) < putRecordFixed {
		return nil, bad("%d bytes, shorter than its %d fixed bytes", len(b), putRecordFixed)
	}
	le := binary.LittleEndian
	hl, sl, n := uint64(le.Uint32(b[8:])), uint64(le.Uint32(b[12:])), uint64(le.Uint32(b[16:]))
	if r := le.Uint32(b[20:]); r != 0 {
		return nil, bad("reserved field %#x", r)
	}
	if putRecordFixed+hl+sl+4*n != uint64(len(b)) {
		return nil, bad("header %d, spec %d and %d crcs do not make its %d bytes", hl, sl, n, len(b))
	}
	rest := b[putRecordFixed:]
	h, err := DecodeHeader(rest[:hl])
	if err != nil {
		return nil, fmt.Errorf("put record: %w", err)
	}
	m, err := DecodeModelSpec(rest[hl : hl+sl])
	if err != nil {
		return nil, fmt.Errorf("put record: %w", err)
	}
	if uint64(len(h.Chunks)) != n {
		return nil, bad("%d crcs for %d chunks", n, len(h.Chunks))
	}
	if m.Fingerprint() != h.Model {
		return nil, bad("spec is not the model of packet %s", h.ID.Short())
	}
	crcs := rest[hl+sl:]
	for i := range h.Chunks {
		h.Chunks[i].CRC32C = le.Uint32(crcs[4*i:])
	}
	return &PutRecord{Seq: le.Uint64(b), Header: h, Spec: m}, nil
}

// EncodeRecordSeq returns the framed value of the next record sequence.
func EncodeRecordSeq(n uint64) []byte {
	v, err := Seal(KindRecordSeq, binary.LittleEndian.AppendUint64(nil, n))
	if err != nil {
		panic(err) // 8 bytes always fit
	}
	return v
}

// DecodeRecordSeq parses the value EncodeRecordSeq wrote.
func DecodeRecordSeq(v []byte) (uint64, error) {
	b, err := Unseal(KindRecordSeq, v)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: record sequence: %d bytes, want 8", ErrCorruption, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}
