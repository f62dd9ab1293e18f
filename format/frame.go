package format

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// Every catalog value is a record: a 16-byte prefix, then a body (a
// FlatBuffer for the kinds in this package).
//
//	+-----------+-----------+-----------+------------+-----------------------+---------+
//	| magic u32 | version   | reserved  | body len   | crc32c u32            | body    |
//	| LE        | u16 LE    | u16, 0    | u32 LE     | of bytes 0..12 + body | ...     |
//	+-----------+-----------+-----------+------------+-----------------------+---------+
//	0           4           6           8            12                      16
//
// The CRC covers the prefix's first 12 bytes as well as the body, so that a
// flipped version or length bit reads as corruption, not as a newer format.
// Unseal checks magic, length, CRC, then version, in that order, before any
// byte of the body is interpreted.
const FrameSize = 16

// RecordKind is one kind of framed record. Each kind has its own magic
// number, so that a value of one kind is never read as another.
type RecordKind struct {
	Name    string // for error messages, e.g. "packet header"
	Magic   uint32 // four ASCII bytes read little endian, see MagicOf
	Version uint16 // the version written; Unseal refuses newer ones
	MaxBody uint32 // bodies above this many bytes are refused, <= 1<<31
}

// MagicOf returns the little-endian uint32 whose bytes on disk are s, which
// must be four bytes long.
func MagicOf(s string) uint32 {
	if len(s) != 4 {
		panic("format: MagicOf needs 4 bytes, got " + s)
	}
	return binary.LittleEndian.Uint32([]byte(s))
}

// Record kinds defined by this package. Other packages register theirs with
// RegisterKind; magic numbers "KVSP" (span records) and "KVAR" (artifacts)
// are reserved for them.
var (
	KindPacketHeader = RegisterKind(RecordKind{
		Name: "packet header", Magic: MagicOf("KVPH"), Version: FormatMajor, MaxBody: 64 << 20,
	})
	KindModelSpec = RegisterKind(RecordKind{
		Name: "model spec", Magic: MagicOf("KVMS"), Version: FormatMajor, MaxBody: 64 << 10,
	})
)

var kinds struct {
	sync.Mutex
	byMagic map[uint32]RecordKind
}

// RegisterKind records k in the registry of record kinds and returns it. It
// is meant for package-level variables; it panics (a programming error,
// found at init) when k's magic is already taken, its version is 0, or its
// MaxBody is not in [1, 1<<31].
func RegisterKind(k RecordKind) RecordKind {
	kinds.Lock()
	defer kinds.Unlock()
	if kinds.byMagic == nil {
		kinds.byMagic = make(map[uint32]RecordKind)
	}
	if old, ok := kinds.byMagic[k.Magic]; ok {
		panic(fmt.Sprintf("format: record kind %q: magic %#08x already used by %q", k.Name, k.Magic, old.Name))
	}
	if k.Version == 0 || k.MaxBody == 0 || k.MaxBody > 1<<31 {
		panic(fmt.Sprintf("format: record kind %q: version %d, max body %d", k.Name, k.Version, k.MaxBody))
	}
	kinds.byMagic[k.Magic] = k
	return k
}

// KindOf returns the registered kind whose magic starts b, for tools that
// meet a record of unknown kind.
func KindOf(b []byte) (RecordKind, bool) {
	if len(b) < 4 {
		return RecordKind{}, false
	}
	kinds.Lock()
	defer kinds.Unlock()
	k, ok := kinds.byMagic[binary.LittleEndian.Uint32(b)]
	return k, ok
}

// Seal frames body as a record of kind k. It returns ErrInvalidArgument if
// the body is larger than k.MaxBody.
func Seal(k RecordKind, body []byte) ([]byte, error) {
	if uint64(len(body)) > uint64(k.MaxBody) {
		return nil, fmt.Errorf("%w: %s: body of %d bytes exceeds %d", ErrInvalidArgument, k.Name, len(body), k.MaxBody)
	}
	b := make([]byte, FrameSize+len(body))
	binary.LittleEndian.PutUint32(b[0:], k.Magic)
	binary.LittleEndian.PutUint16(b[4:], k.Version)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(body)))
	copy(b[FrameSize:], body)
	binary.LittleEndian.PutUint32(b[12:], frameCRC(b))
	return b, nil
}

// frameCRC is the CRC32C of a record's first 12 bytes and its body.
func frameCRC(b []byte) uint32 { return CRCUpdate(CRC(b[:12]), b[FrameSize:]) }

// Unseal checks a record of kind k and returns its body, which aliases b.
// Any bad byte is ErrCorruption; a version newer than k.Version (with a
// correct CRC) is ErrVersion.
func Unseal(k RecordKind, b []byte) ([]byte, error) {
	if len(b) < FrameSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, shorter than the %d-byte frame", ErrCorruption, k.Name, len(b), FrameSize)
	}
	if m := binary.LittleEndian.Uint32(b); m != k.Magic {
		return nil, fmt.Errorf("%w: %s: magic %q, want %q", ErrCorruption, k.Name, b[:4], magicBytes(k.Magic))
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if uint64(n) > uint64(k.MaxBody) {
		return nil, fmt.Errorf("%w: %s: body length %d exceeds %d", ErrCorruption, k.Name, n, k.MaxBody)
	}
	if uint64(n) != uint64(len(b)-FrameSize) {
		return nil, fmt.Errorf("%w: %s: body length %d, but %d bytes follow the frame", ErrCorruption, k.Name, n, len(b)-FrameSize)
	}
	if got, want := binary.LittleEndian.Uint32(b[12:]), frameCRC(b); got != want {
		return nil, fmt.Errorf("%w: %s: crc32c %08x, computed %08x", ErrCorruption, k.Name, got, want)
	}
	if r := binary.LittleEndian.Uint16(b[6:]); r != 0 {
		return nil, fmt.Errorf("%w: %s: reserved frame field %#x", ErrCorruption, k.Name, r)
	}
	switch v := binary.LittleEndian.Uint16(b[4:]); {
	case v == 0:
		return nil, fmt.Errorf("%w: %s: version 0", ErrCorruption, k.Name)
	case v > k.Version:
		return nil, fmt.Errorf("%w: %s: version %d is newer than %d, which this build reads", ErrVersion, k.Name, v, k.Version)
	}
	return b[FrameSize:], nil
}

func magicBytes(m uint32) []byte { return binary.LittleEndian.AppendUint32(nil, m) }
