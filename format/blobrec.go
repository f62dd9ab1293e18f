package format

import (
	"encoding/binary"
	"fmt"
)

// Blob file records and the next-blob sequence, the catalog's accounting of
// the blob log. A blob file record (kind "KVBF", under key 'b' | file
// number u32 BE) has a 40-byte little-endian body:
//
//	+-----------+-------------+--------------+-----------+----------+-----------+-----------+
//	| flags u32 | extents u32 | live ext u32 | reserved  | size u64 | live u64  | dead u64  |
//	| bit 0:    | ever        | not deleted  | u32, 0    | append   | bytes of  | bytes of  |
//	| sealed    | catalogued  |              |           | offset   | live ext. | deleted   |
//	+-----------+-------------+--------------+-----------+----------+-----------+-----------+
//	0           4             8              12          16         24          32        40
//
// The sequence (kind "KVSQ", under key 's' | "next-blob") has a 4-byte
// body: the next blob file number, u32 LE.
//
// size is the offset at which the next extent goes: the end of the last
// catalogued extent (or the 4 KiB blob header). It never decreases.
var (
	KindBlobFile = RegisterKind(RecordKind{
		Name: "blob file record", Magic: MagicOf("KVBF"), Version: 1, MaxBody: 1 << 10,
	})
	KindSequence = RegisterKind(RecordKind{
		Name: "sequence", Magic: MagicOf("KVSQ"), Version: 1, MaxBody: 1 << 10,
	})
)

const (
	blobRecordSize = 40
	blobSealed     = 1 << 0
)

// BlobFileRecord is the body of a "KVBF" record.
type BlobFileRecord struct {
	Size        uint64 // where the next extent goes; never decreases
	LiveBytes   uint64 // bytes of catalogued extents
	DeadBytes   uint64 // bytes of deleted extents
	Extents     uint32 // extents ever catalogued in the file
	LiveExtents uint32
	Sealed      bool // no extent will be appended
}

// EncodeBlobFileRecord returns the framed record of r.
func EncodeBlobFileRecord(r *BlobFileRecord) []byte {
	b := make([]byte, blobRecordSize)
	var flags uint32
	if r.Sealed {
		flags |= blobSealed
	}
	le := binary.LittleEndian
	le.PutUint32(b[0:], flags)
	le.PutUint32(b[4:], r.Extents)
	le.PutUint32(b[8:], r.LiveExtents)
	le.PutUint64(b[16:], r.Size)
	le.PutUint64(b[24:], r.LiveBytes)
	le.PutUint64(b[32:], r.DeadBytes)
	v, err := Seal(KindBlobFile, b)
	if err != nil {
		panic(err) // 40 bytes always fit
	}
	return v
}

// DecodeBlobFileRecord checks and parses a framed "KVBF" record: unknown
// flags, a reserved field not zero, a size not 4 KiB aligned past the blob
// header, or live and dead bytes or extents that do not fit are
// ErrCorruption.
func DecodeBlobFileRecord(v []byte) (BlobFileRecord, error) {
	var r BlobFileRecord
	b, err := Unseal(KindBlobFile, v)
	if err != nil {
		return r, err
	}
	if len(b) < blobRecordSize {
		return r, fmt.Errorf("%w: blob file record: %d bytes, want %d", ErrCorruption, len(b), blobRecordSize)
	}
	le := binary.LittleEndian
	flags := le.Uint32(b[0:])
	if reserved := le.Uint32(b[12:]); flags&^blobSealed != 0 || reserved != 0 {
		return r, fmt.Errorf("%w: blob file record: unknown flags %#x or reserved field %#x", ErrCorruption, flags, reserved)
	}
	r.Sealed = flags&blobSealed != 0
	r.Extents = le.Uint32(b[4:])
	r.LiveExtents = le.Uint32(b[8:])
	r.Size = le.Uint64(b[16:])
	r.LiveBytes = le.Uint64(b[24:])
	r.DeadBytes = le.Uint64(b[32:])
	if r.Size < BlobHeaderSize || r.Size%Alignment != 0 ||
		r.LiveBytes > r.Size || r.DeadBytes > r.Size-r.LiveBytes || r.LiveExtents > r.Extents {
		return r, fmt.Errorf("%w: blob file record: inconsistent size %d, live %d, dead %d, extents %d/%d",
			ErrCorruption, r.Size, r.LiveBytes, r.DeadBytes, r.LiveExtents, r.Extents)
	}
	return r, nil
}

// EncodeSequence returns the framed "KVSQ" record of counter n.
func EncodeSequence(n uint32) []byte {
	v, err := Seal(KindSequence, binary.LittleEndian.AppendUint32(nil, n))
	if err != nil {
		panic(err) // 4 bytes always fit
	}
	return v
}

// DecodeSequence checks and parses a framed "KVSQ" record.
func DecodeSequence(v []byte) (uint32, error) {
	b, err := Unseal(KindSequence, v)
	if err != nil {
		return 0, err
	}
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: sequence: %d bytes, want 4", ErrCorruption, len(b))
	}
	return binary.LittleEndian.Uint32(b), nil
}
