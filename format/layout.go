package format

import (
	"cmp"
	"encoding/binary"
	"fmt"
)

// Alignment of files' blocks: extents start and end on it, so that an extent
// can be mmapped, read with O_DIRECT or registered with a GPU driver.
const Alignment = 4096

// ChunkAlignment is the alignment of each chunk inside an extent, relative to
// the extent's start (and so absolute, since extents are 4 KiB aligned).
const ChunkAlignment = 64

// AlignUp rounds n up to a multiple of a (a power of two). It reports false
// when the result would overflow.
func AlignUp(n, a uint64) (uint64, bool) {
	r := (n + a - 1) &^ (a - 1)
	return r, r >= n
}

// FormatMajor and FormatMinor are the on-disk format this code writes
// (docs/format.md, "Versions and compatibility", has the table of
// versions). A store whose FORMAT names a newer major version is refused
// (ErrVersion); a newer minor is read and written, since minor versions
// only add things an older reader may ignore. The versions:
//
//   - 1.0 (Version10): packet extents, the catalog, span memories and
//     artifacts.
//   - 1.1 (Version11): the put record leading each packet extent, tombstone
//     extents for Deletes and the catalog's next-record sequence
//     (put_record.go, tombstone.go). A 1.0 reader serves a 1.1 store (it
//     reads chunks where the header says and ignores the rest); a 1.1
//     reader serves a 1.0 store but cannot rebuild its catalog from it.
//   - 1.2 (Version12): evictions write tombstones as Deletes do, so a
//     rebuilt catalog keeps evicted packets evicted; the FORMAT file has a
//     second copy, FORMAT.copy, with the same 20 bytes; and after a crash
//     the catalog may lag the blob log by acknowledged Puts and Deletes
//     (their batches are not synced). No byte layout changed: a 1.1
//     reader serves a 1.2 store (the tombstones are the ones it knows,
//     FORMAT.copy a file it never opens, and it reconciles the catalog on
//     a read-write open); a 1.0 reader does not reconcile.
const (
	FormatMajor uint16 = 1
	FormatMinor uint16 = 2
)

// The released format versions, oldest first.
var (
	Version10 = Version{1, 0}
	Version11 = Version{1, 1}
	Version12 = Version{1, 2}
)

// FORMAT file, 20 bytes, kept twice in a store's directory (FORMAT and,
// since 1.2, FORMAT.copy, the same bytes; store/internal/catalog reads
// and writes them):
//
//	+--------------------+----------+----------+----------+----------+
//	| magic "KVSTORE\0"  | major u16| minor u16| flags u32| crc32c   |
//	| 8 bytes            | LE       | LE       | 0        | of 0..16 |
//	+--------------------+----------+----------+----------+----------+
const (
	formatMagic    = "KVSTORE\x00"
	FormatFileSize = 20
)

// Version is a (major, minor) format version.
type Version struct{ Major, Minor uint16 }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare returns -1, 0 or +1 as v is older than, the same as or newer
// than w.
func (v Version) Compare(w Version) int {
	if v.Major != w.Major {
		return cmp.Compare(v.Major, w.Major)
	}
	return cmp.Compare(v.Minor, w.Minor)
}

// Current is the version this code writes.
var Current = Version{FormatMajor, FormatMinor}

// EncodeFormatFile returns the FORMAT file's bytes for v.
func EncodeFormatFile(v Version) []byte {
	b := make([]byte, FormatFileSize)
	copy(b, formatMagic)
	binary.LittleEndian.PutUint16(b[8:], v.Major)
	binary.LittleEndian.PutUint16(b[10:], v.Minor)
	binary.LittleEndian.PutUint32(b[16:], CRC(b[:16]))
	return b
}

// DecodeFormatFile parses a FORMAT file. It returns ErrCorruption for bad
// bytes and ErrVersion (with the version) for a major version newer than
// FormatMajor.
func DecodeFormatFile(b []byte) (Version, error) {
	if len(b) != FormatFileSize {
		return Version{}, fmt.Errorf("%w: FORMAT file is %d bytes, want %d", ErrCorruption, len(b), FormatFileSize)
	}
	if string(b[:8]) != formatMagic {
		return Version{}, fmt.Errorf("%w: FORMAT file: bad magic %q", ErrCorruption, b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[16:]), CRC(b[:16]); got != want {
		return Version{}, fmt.Errorf("%w: FORMAT file: crc32c %08x, computed %08x", ErrCorruption, got, want)
	}
	if flags := binary.LittleEndian.Uint32(b[12:]); flags != 0 {
		return Version{}, fmt.Errorf("%w: FORMAT file: unknown flags %#x", ErrCorruption, flags)
	}
	v := Version{binary.LittleEndian.Uint16(b[8:]), binary.LittleEndian.Uint16(b[10:])}
	if v.Major > FormatMajor {
		return v, fmt.Errorf("%w: store format %v is newer than %v, which this build reads", ErrVersion, v, Current)
	}
	if v.Major == 0 {
		return v, fmt.Errorf("%w: FORMAT file: major version 0", ErrCorruption)
	}
	return v, nil
}

// Blob file header, the first Alignment bytes of every blob file:
//
//	+--------------------+-----------+-----------+-----------+-----------+--------------+
//	| magic "KVBLOB\0\1" | major u16 | minor u16 | filenum   | crc32c    | zero padding |
//	| 8 bytes            | LE        | LE        | u32 LE    | of 0..16  | to 4096      |
//	+--------------------+-----------+-----------+-----------+-----------+--------------+
const (
	blobMagic      = "KVBLOB\x00\x01"
	BlobHeaderSize = Alignment
	blobHeaderUsed = 20
)

// EncodeBlobHeader returns the 4 KiB header of blob file num.
func EncodeBlobHeader(num uint32) []byte {
	b := make([]byte, BlobHeaderSize)
	copy(b, blobMagic)
	binary.LittleEndian.PutUint16(b[8:], FormatMajor)
	binary.LittleEndian.PutUint16(b[10:], FormatMinor)
	binary.LittleEndian.PutUint32(b[12:], num)
	binary.LittleEndian.PutUint32(b[16:], CRC(b[:16]))
	return b
}

// BlobHeaderVersion checks a blob file header as DecodeBlobHeader does
// and returns the format version of the code that created the file.
func BlobHeaderVersion(b []byte) (Version, error) {
	if _, err := DecodeBlobHeader(b); err != nil {
		return Version{}, err
	}
	return Version{binary.LittleEndian.Uint16(b[8:]), binary.LittleEndian.Uint16(b[10:])}, nil
}

// DecodeBlobHeader checks a blob file header and returns its file number.
// Only the first 20 bytes are interpreted; the padding is not checked.
func DecodeBlobHeader(b []byte) (uint32, error) {
	if len(b) < blobHeaderUsed {
		return 0, fmt.Errorf("%w: blob header: %d bytes, want %d", ErrCorruption, len(b), BlobHeaderSize)
	}
	if string(b[:8]) != blobMagic {
		return 0, fmt.Errorf("%w: blob header: bad magic %q", ErrCorruption, b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[16:]), CRC(b[:16]); got != want {
		return 0, fmt.Errorf("%w: blob header: crc32c %08x, computed %08x", ErrCorruption, got, want)
	}
	switch major := binary.LittleEndian.Uint16(b[8:]); {
	case major == 0:
		return 0, fmt.Errorf("%w: blob header: format major 0", ErrCorruption)
	case major > FormatMajor:
		return 0, fmt.Errorf("%w: blob header: format major %d (this build reads %d)", ErrVersion, major, FormatMajor)
	}
	return binary.LittleEndian.Uint32(b[12:]), nil
}

// Extent trailer, the last TrailerSize bytes of every extent. An extent is
//
//	offset (4 KiB aligned)                                    offset+length (4 KiB aligned)
//	| chunk 0 | pad | chunk 1 | pad | ... | chunk n | zero pad ... | trailer (64 bytes) |
//
// with each chunk starting ChunkAlignment-aligned and the trailer ending the
// extent, so that a scanner can find extents from either end of a file
// without the catalog. The trailer:
//
//	+------------------+-----------+------------+------------+-------------+-------------+
//	| magic "KVXTRAIL" | packet id | ext offset | payload len| payload crc | trailer crc |
//	| 8                | 32        | u64 LE     | u64 LE     | u32 LE      | u32 of 0..60|
//	+------------------+-----------+------------+------------+-------------+-------------+
//
// The payload is the bytes from the extent's start to the end of its last
// chunk; its CRC32C covers them, padding between chunks included (zeroes).
const (
	trailerMagic = "KVXTRAIL"
	TrailerSize  = 64
)

// Trailer describes one extent.
type Trailer struct {
	Packet     PacketID
	Offset     uint64 // file offset of the extent's first byte
	PayloadLen uint64 // bytes of chunks and inter-chunk padding
	PayloadCRC uint32 // CRC32C of those bytes
}

// ExtentLength is the 4 KiB-aligned length of an extent holding payloadLen
// bytes and a trailer; false if it overflows.
func ExtentLength(payloadLen uint64) (uint64, bool) {
	n := payloadLen + TrailerSize
	if n < payloadLen {
		return 0, false
	}
	return AlignUp(n, Alignment)
}

// Encode returns the trailer's 64 bytes.
func (t *Trailer) Encode() []byte {
	b := make([]byte, TrailerSize)
	copy(b, trailerMagic)
	copy(b[8:40], t.Packet[:])
	binary.LittleEndian.PutUint64(b[40:], t.Offset)
	binary.LittleEndian.PutUint64(b[48:], t.PayloadLen)
	binary.LittleEndian.PutUint32(b[56:], t.PayloadCRC)
	binary.LittleEndian.PutUint32(b[60:], CRC(b[:60]))
	return b
}

// DecodeTrailer parses and checks a trailer. It does not check the payload.
func DecodeTrailer(b []byte) (Trailer, error) {
	var t Trailer
	if len(b) != TrailerSize {
		return t, fmt.Errorf("%w: extent trailer: %d bytes, want %d", ErrCorruption, len(b), TrailerSize)
	}
	if string(b[:8]) != trailerMagic {
		return t, fmt.Errorf("%w: extent trailer: bad magic", ErrCorruption)
	}
	if got, want := binary.LittleEndian.Uint32(b[60:]), CRC(b[:60]); got != want {
		return t, fmt.Errorf("%w: extent trailer: crc32c %08x, computed %08x", ErrCorruption, got, want)
	}
	copy(t.Packet[:], b[8:40])
	t.Offset = binary.LittleEndian.Uint64(b[40:])
	t.PayloadLen = binary.LittleEndian.Uint64(b[48:])
	t.PayloadCRC = binary.LittleEndian.Uint32(b[56:])
	if t.Offset%Alignment != 0 || t.Offset < BlobHeaderSize {
		return t, fmt.Errorf("%w: extent trailer: extent offset %d not a 4 KiB-aligned position after the blob header", ErrCorruption, t.Offset)
	}
	if n, ok := ExtentLength(t.PayloadLen); !ok || t.Offset+n < t.Offset {
		return t, fmt.Errorf("%w: extent trailer: extent at %d with payload length %d overflows", ErrCorruption, t.Offset, t.PayloadLen)
	}
	return t, nil
}
