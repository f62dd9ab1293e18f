package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Artifacts (kind "KVAR") are the model-side objects the store serves
// beside packets: KV Packet's adapter soft tokens, SeKV's router W, tau and
// rank-gate weights. Each is a named byte string bound to one model
// fingerprint, kept whole in the catalog under
//
//	'a' | name len u16 BE | name | model fp (32)   -> the record below
//	'A' | model fp (32) | name                     -> empty (the listing index)
//
// Body, little endian:
//
//	+-----------+------------+-----------+----------+----------+-------+------+----------+
//	| model fp  | created ns | data len  | name len | note len | dtype | rank | reserved |
//	| 32 bytes  | i64        | u64       | u16      | u16      | u8    | u8   | u16 = 0  |
//	+-----------+------------+-----------+----------+----------+-------+------+----------+
//	0           32           40          48         50         52      53     54         56
//	then shape (u64 x rank), name, note, data.
//
// Model and name are repeated in the body, so a value read under another
// key is detected. Data is at most MaxArtifactSize bytes; a dtype's shape
// must account for every byte of it (ArtifactMeta.Check).
//
// The data of the SeKV artifacts is little-endian f32 (projections.go).
const (
	// MaxArtifactSize bounds an artifact's data.
	MaxArtifactSize = 64 << 20
	// ArtifactFixedSize is the body's fixed part before the shape.
	ArtifactFixedSize = 56
	// MaxArtifactRank bounds the shape's length.
	MaxArtifactRank = 8
)

// KindArtifact is the record kind of artifacts.
var KindArtifact = RegisterKind(RecordKind{
	Name: "artifact", Magic: MagicOf("KVAR"), Version: 1,
	MaxBody: MaxArtifactSize + ArtifactFixedSize + 8*MaxArtifactRank + 2*MaxNameLen,
})

// ArtifactMeta describes an artifact's data for its readers. The store
// checks it (a dtype's Shape must account for every byte) but does not
// otherwise interpret it.
type ArtifactMeta struct {
	// DType is the element type of the data, with Shape its dimensions;
	// DTypeInvalid (0) with no Shape for opaque bytes.
	DType DType
	Shape []int
	// Note is free text (at most MaxNameLen bytes), e.g. the training run
	// that produced it.
	Note string
}

// Check validates m for data of n bytes. Its errors carry no sentinel:
// callers wrap them.
func (m *ArtifactMeta) Check(n int) error {
	switch {
	case len(m.Note) > MaxNameLen:
		return fmt.Errorf("note of %d bytes exceeds %d", len(m.Note), MaxNameLen)
	case len(m.Shape) > MaxArtifactRank:
		return fmt.Errorf("rank %d exceeds %d", len(m.Shape), MaxArtifactRank)
	case m.DType == DTypeInvalid && len(m.Shape) != 0:
		return fmt.Errorf("a shape without a dtype")
	case m.DType == DTypeInvalid:
		return nil
	case !m.DType.Valid():
		return fmt.Errorf("unknown dtype %v", m.DType)
	}
	elems := 1
	for _, d := range m.Shape {
		if d < 0 || d > math.MaxInt32 || (d > 0 && elems > n/d) {
			return fmt.Errorf("shape %v does not fit %d bytes", m.Shape, n)
		}
		elems *= d
	}
	if elems*m.DType.Size() != n {
		return fmt.Errorf("shape %v of %v is %d bytes, data %d", m.Shape, m.DType, elems*m.DType.Size(), n)
	}
	return nil
}

// Artifact is a decoded artifact body, less its data: the last Size bytes
// of the body.
type Artifact struct {
	Model         Fingerprint
	Name          string
	Meta          ArtifactMeta
	Size          int // bytes of data
	CreatedUnixNs int64
}

// EncodeArtifact returns the body of an artifact record (to Seal with
// KindArtifact). The caller checked name, data's size and meta.
func EncodeArtifact(model Fingerprint, name string, data []byte, m *ArtifactMeta, created int64) []byte {
	n := ArtifactFixedSize + 8*len(m.Shape) + len(name) + len(m.Note) + len(data)
	b := make([]byte, ArtifactFixedSize, n)
	copy(b, model[:])
	le := binary.LittleEndian
	le.PutUint64(b[32:], uint64(created))
	le.PutUint64(b[40:], uint64(len(data)))
	le.PutUint16(b[48:], uint16(len(name)))
	le.PutUint16(b[50:], uint16(len(m.Note)))
	b[52], b[53] = byte(m.DType), byte(len(m.Shape))
	for _, d := range m.Shape {
		b = le.AppendUint64(b, uint64(d))
	}
	b = append(b, name...)
	b = append(b, m.Note...)
	return append(b, data...)
}

// DecodeArtifact parses an artifact body (its frame already checked).
// Lengths that do not add up to the body, a reserved field not zero, or a
// meta that does not describe the data are ErrCorruption.
func DecodeArtifact(b []byte) (Artifact, error) {
	var a Artifact
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: artifact record: %s", ErrCorruption, fmt.Sprintf(f, args...))
	}
	if len(b) < ArtifactFixedSize {
		return a, bad("%d bytes, shorter than its %d fixed bytes", len(b), ArtifactFixedSize)
	}
	le := binary.LittleEndian
	a.Model = Fingerprint(b[:32])
	a.CreatedUnixNs = int64(le.Uint64(b[32:]))
	size, nameLen, noteLen := le.Uint64(b[40:]), int(le.Uint16(b[48:])), int(le.Uint16(b[50:]))
	rank := int(b[53])
	a.Meta.DType = DType(b[52])
	switch {
	case le.Uint16(b[54:]) != 0:
		return a, bad("reserved field %#x", le.Uint16(b[54:]))
	case rank > MaxArtifactRank || nameLen > MaxNameLen || noteLen > MaxNameLen || size > MaxArtifactSize:
		return a, bad("rank %d, name %d bytes, note %d bytes, data %d bytes out of range", rank, nameLen, noteLen, size)
	case uint64(len(b)) != uint64(ArtifactFixedSize+8*rank+nameLen+noteLen)+size:
		return a, bad("%d bytes, its lengths add up to %d", len(b), uint64(ArtifactFixedSize+8*rank+nameLen+noteLen)+size)
	}
	off := ArtifactFixedSize
	for range rank {
		d := le.Uint64(b[off:])
		if d > math.MaxInt32 {
			return a, bad("dimension %d", d)
		}
		a.Meta.Shape = append(a.Meta.Shape, int(d))
		off += 8
	}
	a.Name = string(b[off : off+nameLen])
	a.Meta.Note = string(b[off+nameLen : off+nameLen+noteLen])
	a.Size = int(size)
	if err := a.Meta.Check(a.Size); err != nil {
		return a, bad("meta: %v", err)
	}
	return a, nil
}
