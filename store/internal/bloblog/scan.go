package bloblog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// Scanned is one whole extent Scan found: its trailer decodes, names the
// extent's own offset and length, and its payload matches the trailer's
// CRC32C, so every byte of it reached the file as written (an extent is
// synced before anything refers to it, and a torn one fails its CRC).
type Scanned struct {
	Offset, Length uint64
	Trailer        format.Trailer
	Payload        []byte // the extent's payload; valid until fn returns
}

// Scan walks blob file f (called name, size bytes long) forward from from,
// an extent boundary, without the catalog: at each position it looks for
// the trailer that names it at the end of each 4 KiB block that follows,
// checks the first it finds, payload CRC included, and calls fn with it.
// It stops at the first position where no whole extent starts (the file's
// end, or bytes a write left torn or never finished) and returns that
// position. Only read errors and fn's are returned; bad bytes end the walk.
func Scan(f vfs.File, name string, from, size uint64, fn func(e *Scanned) error) (end uint64, err error) {
	var tb [format.TrailerSize]byte
	var buf []byte
	pos := from
	for pos < size {
		e, found, err := findTrailer(f, name, pos, size, tb[:])
		if err != nil || !found {
			return pos, err
		}
		if uint64(cap(buf)) < e.Trailer.PayloadLen {
			buf = make([]byte, e.Trailer.PayloadLen)
		}
		e.Payload = buf[:e.Trailer.PayloadLen]
		if err := readAt(f, name, e.Payload, pos); err != nil {
			return pos, err
		}
		if CRC(e.Payload) != e.Trailer.PayloadCRC {
			return pos, nil // torn: the write never completed
		}
		if err := fn(&e); err != nil {
			return pos, err
		}
		pos += e.Length
	}
	return pos, nil
}

// findTrailer looks for the trailer of an extent starting at pos.
func findTrailer(f vfs.File, name string, pos, size uint64, tb []byte) (Scanned, bool, error) {
	for end := pos + format.Alignment; end <= size; end += format.Alignment {
		if err := readAt(f, name, tb, end-format.TrailerSize); err != nil {
			return Scanned{}, false, err
		}
		t, err := format.DecodeTrailer(tb)
		if err != nil || t.Offset != pos {
			continue
		}
		if n, ok := format.ExtentLength(t.PayloadLen); !ok || n != end-pos {
			return Scanned{}, false, nil
		}
		return Scanned{Offset: pos, Length: end - pos, Trailer: t}, true, nil
	}
	return Scanned{}, false, nil
}

func readAt(f vfs.File, name string, b []byte, off uint64) error {
	n, err := f.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("short read: %d of %d bytes", n, len(b))
	}
	return fmt.Errorf("store: read blob file %s at %d: %w", name, off, err)
}

// WriteRecordExtent writes rec as the whole payload of its own extent at
// off of f, trailer naming id, and returns the extent's length (one 4 KiB
// block for a tombstone).
func WriteRecordExtent(f vfs.File, name string, off uint64, rec []byte, id format.PacketID) (uint64, error) {
	b, err := RecordExtent(off, rec, id)
	if err != nil {
		return 0, err
	}
	return uint64(len(b)), WriteAt(f, name, b, off)
}

// RecordExtent returns the bytes of the extent WriteRecordExtent writes at
// off: rec, zeros, and the trailer naming id.
func RecordExtent(off uint64, rec []byte, id format.PacketID) ([]byte, error) {
	n, ok := format.ExtentLength(uint64(len(rec)))
	if !ok {
		return nil, fmt.Errorf("%w: record extent of %d bytes overflows", ErrInvalidArgument, len(rec))
	}
	b := make([]byte, n)
	copy(b, rec)
	t := format.Trailer{Packet: id, Offset: off, PayloadLen: uint64(len(rec)), PayloadCRC: CRC(rec)}
	copy(b[n-format.TrailerSize:], t.Encode())
	return b, nil
}
