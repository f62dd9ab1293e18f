package store

import (
	"encoding/binary"
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// Record kinds of the catalog values this package defines (the layouts are
// drawn in doc.go).
var (
	kindBlobFile = format.RegisterKind(format.RecordKind{
		Name: "blob file record", Magic: format.MagicOf("KVBF"), Version: 1, MaxBody: 1 << 10,
	})
	kindSequence = format.RegisterKind(format.RecordKind{
		Name: "sequence", Magic: format.MagicOf("KVSQ"), Version: 1, MaxBody: 1 << 10,
	})
)

const (
	blobRecordSize = 40
	flagSealed     = 1 << 0
)

// BlobFileInfo is the catalog's accounting of one blob file.
type BlobFileInfo struct {
	Num  uint32
	Path string // not stored: derived from Num
	// Size is where the next extent goes: the end of the last catalogued
	// extent. It never decreases. Bytes past it are not referenced.
	Size        uint64
	LiveBytes   uint64 // bytes of extents whose packets are catalogued
	DeadBytes   uint64 // bytes of extents whose packets were deleted
	Extents     uint32 // extents ever catalogued in the file
	LiveExtents uint32
	Sealed      bool // no extent will be appended
	Views       int  // not stored: views holding the file now
}

// encodeBlobRecord returns the framed catalog value of r.
func encodeBlobRecord(r *BlobFileInfo) []byte {
	b := make([]byte, blobRecordSize)
	var flags uint32
	if r.Sealed {
		flags |= flagSealed
	}
	binary.LittleEndian.PutUint32(b[0:], flags)
	binary.LittleEndian.PutUint32(b[4:], r.Extents)
	binary.LittleEndian.PutUint32(b[8:], r.LiveExtents)
	binary.LittleEndian.PutUint64(b[16:], r.Size)
	binary.LittleEndian.PutUint64(b[24:], r.LiveBytes)
	binary.LittleEndian.PutUint64(b[32:], r.DeadBytes)
	v, err := format.Seal(kindBlobFile, b)
	if err != nil {
		panic(err) // 40 bytes always fit
	}
	return v
}

// decodeBlobRecord parses the record of blob file num.
func decodeBlobRecord(num uint32, v []byte) (BlobFileInfo, error) {
	r := BlobFileInfo{Num: num}
	b, err := format.Unseal(kindBlobFile, v)
	if err != nil {
		return r, fmt.Errorf("blob file %06d: %w", num, err)
	}
	if len(b) < blobRecordSize {
		return r, fmt.Errorf("%w: blob file %06d record: %d bytes, want %d", ErrCorruption, num, len(b), blobRecordSize)
	}
	flags := binary.LittleEndian.Uint32(b[0:])
	if reserved := binary.LittleEndian.Uint32(b[12:]); flags&^flagSealed != 0 || reserved != 0 {
		return r, fmt.Errorf("%w: blob file %06d record: unknown flags %#x or reserved field %#x", ErrCorruption, num, flags, reserved)
	}
	r.Sealed = flags&flagSealed != 0
	r.Extents = binary.LittleEndian.Uint32(b[4:])
	r.LiveExtents = binary.LittleEndian.Uint32(b[8:])
	r.Size = binary.LittleEndian.Uint64(b[16:])
	r.LiveBytes = binary.LittleEndian.Uint64(b[24:])
	r.DeadBytes = binary.LittleEndian.Uint64(b[32:])
	if r.Size < format.BlobHeaderSize || r.Size%format.Alignment != 0 ||
		r.LiveBytes > r.Size || r.DeadBytes > r.Size-r.LiveBytes || r.LiveExtents > r.Extents {
		return r, fmt.Errorf("%w: blob file %06d record: inconsistent size %d, live %d, dead %d, extents %d/%d",
			ErrCorruption, num, r.Size, r.LiveBytes, r.DeadBytes, r.LiveExtents, r.Extents)
	}
	return r, nil
}

// encodeSequence returns the framed catalog value of a counter.
func encodeSequence(n uint32) []byte {
	v, err := format.Seal(kindSequence, binary.LittleEndian.AppendUint32(nil, n))
	if err != nil {
		panic(err) // 4 bytes always fit
	}
	return v
}

// decodeSequence parses a counter.
func decodeSequence(v []byte) (uint32, error) {
	b, err := format.Unseal(kindSequence, v)
	if err != nil {
		return 0, err
	}
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: sequence: %d bytes, want 4", ErrCorruption, len(b))
	}
	return binary.LittleEndian.Uint32(b), nil
}
