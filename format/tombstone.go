package format

import (
	"encoding/binary"
	"fmt"
)

// A tombstone records a Delete in the blob log, so that a catalog rebuilt
// from the blob files keeps deleted packets deleted. It is a framed record
// of kind "KVTS", the whole payload of its own extent (one 4 KiB block:
// the record, zero padding, the trailer, whose packet id is the deleted
// packet's). Its body, little endian:
//
//	+---------+-----------+-------------+-----------+-----------+-----------+
//	| seq u64 | packet id | model       | ns len    | reserved  | namespace |
//	|         | 32 bytes  | fingerprint | u16       | u16, 0    | ns len    |
//	|         |           | 32 bytes    |           |           | bytes     |
//	+---------+-----------+-------------+-----------+-----------+-----------+
//	0         8           40            72          74          76
//
// seq is from the same sequence as put records': a tombstone deletes the
// put records of its packet with a smaller seq, never a later one.
var KindTombstone = RegisterKind(RecordKind{
	Name: "tombstone", Magic: MagicOf("KVTS"), Version: 1, MaxBody: 2 << 10,
})

const tombstoneFixed = 76

// Tombstone is a decoded tombstone.
type Tombstone struct {
	Seq       uint64
	Namespace string
	ID        PacketID
	Model     Fingerprint
}

// EncodeTombstone returns t's framed record; a namespace longer than
// MaxNameLen is ErrInvalidArgument.
func EncodeTombstone(t *Tombstone) ([]byte, error) {
	if len(t.Namespace) > MaxNameLen {
		return nil, fmt.Errorf("%w: tombstone: namespace of %d bytes exceeds %d", ErrInvalidArgument, len(t.Namespace), MaxNameLen)
	}
	b := make([]byte, tombstoneFixed, tombstoneFixed+len(t.Namespace))
	le := binary.LittleEndian
	le.PutUint64(b[0:], t.Seq)
	copy(b[8:40], t.ID[:])
	copy(b[40:72], t.Model[:])
	le.PutUint16(b[72:], uint16(len(t.Namespace)))
	return Seal(KindTombstone, append(b, t.Namespace...))
}

// DecodeTombstone checks and parses a framed tombstone. Bad bytes are
// ErrCorruption, a newer version ErrVersion.
func DecodeTombstone(v []byte) (*Tombstone, error) {
	b, err := Unseal(KindTombstone, v)
	if err != nil {
		return nil, err
	}
	if len(b) < tombstoneFixed {
		return nil, fmt.Errorf("%w: tombstone: %d bytes, shorter than %d", ErrCorruption, len(b), tombstoneFixed)
	}
	le := binary.LittleEndian
	n := int(le.Uint16(b[72:]))
	if r := le.Uint16(b[74:]); r != 0 {
		return nil, fmt.Errorf("%w: tombstone: reserved field %#x", ErrCorruption, r)
	}
	if n > MaxNameLen || tombstoneFixed+n != len(b) {
		return nil, fmt.Errorf("%w: tombstone: namespace of %d bytes in a %d-byte body", ErrCorruption, n, len(b))
	}
	t := &Tombstone{Seq: le.Uint64(b), Namespace: string(b[tombstoneFixed:])}
	copy(t.ID[:], b[8:40])
	copy(t.Model[:], b[40:72])
	return t, nil
}
