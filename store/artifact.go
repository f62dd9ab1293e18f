package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/kvstore/kvstore/format"
)

// Artifacts are the model-side objects kvstore serves beside packets:
// KV Packet's adapter soft tokens, SeKV's router W, tau and rank-gate
// weights. Each is a named byte string bound to one model fingerprint and
// kept whole in the catalog, framed as record kind "KVAR":
//
//	key   'a' | name len u16 BE | name | model fp (32)   -> the record below
//	      'A' | model fp (32) | name                     -> empty (ListArtifacts)
//
//	body (little endian):
//	+-----------+------------+-----------+----------+----------+-------+------+----------+
//	| model fp  | created ns | data len  | name len | note len | dtype | rank | reserved |
//	| 32 bytes  | i64        | u64       | u16      | u16      | u8    | u8   | u16 = 0  |
//	+-----------+------------+-----------+----------+----------+-------+------+----------+
//	0           32           40          48         50         52      53     54         56
//	then shape (u64 x rank), name, note, data.
//
// Model and name are repeated in the body, so a value read under another
// key is detected. Data is at most MaxArtifactSize bytes.
const MaxArtifactSize = 64 << 20

const (
	tagArtifact      = 'a'
	tagArtifactIndex = 'A'

	artifactFixed   = 56
	maxArtifactRank = 8
)

var kindArtifact = format.RegisterKind(format.RecordKind{
	Name: "artifact", Magic: format.MagicOf("KVAR"), Version: 1,
	MaxBody: MaxArtifactSize + artifactFixed + 8*maxArtifactRank + 2*format.MaxNameLen,
})

// ArtifactMeta describes an artifact's data for its readers. The store
// checks it (a dtype's Shape must account for every byte) but does not
// otherwise interpret it.
type ArtifactMeta struct {
	// DType is the element type of the data, with Shape its dimensions;
	// DTypeInvalid (0) with no Shape for opaque bytes.
	DType format.DType
	Shape []int
	// Note is free text (at most format.MaxNameLen bytes), e.g. the
	// training run that produced it.
	Note string
}

// ArtifactInfo is an artifact's description as stored.
type ArtifactInfo struct {
	Model     format.Fingerprint
	Name      string
	Meta      ArtifactMeta
	Size      int // bytes of data
	CreatedAt time.Time
}

// artifactKey is 'a' | name len u16 BE | name | model.
func artifactKey(model format.Fingerprint, name string) []byte {
	return append(nsPrefix(tagArtifact, name, len(model)), model[:]...)
}

// artifactIndexKey is 'A' | model | name.
func artifactIndexKey(model format.Fingerprint, name string) []byte {
	k := make([]byte, 0, 1+len(model)+len(name))
	k = append(append(k, tagArtifactIndex), model[:]...)
	return append(k, name...)
}

func checkArtifactName(name string) error {
	if name == "" || len(name) > format.MaxNameLen {
		return fmt.Errorf("%w: artifact name of %d bytes, want 1 to %d", ErrInvalidArgument, len(name), format.MaxNameLen)
	}
	return nil
}

// check validates m for data of n bytes. Its errors carry no sentinel:
// callers wrap them.
func (m *ArtifactMeta) check(n int) error {
	switch {
	case len(m.Note) > format.MaxNameLen:
		return fmt.Errorf("note of %d bytes exceeds %d", len(m.Note), format.MaxNameLen)
	case len(m.Shape) > maxArtifactRank:
		return fmt.Errorf("rank %d exceeds %d", len(m.Shape), maxArtifactRank)
	case m.DType == format.DTypeInvalid && len(m.Shape) != 0:
		return fmt.Errorf("a shape without a dtype")
	case m.DType == format.DTypeInvalid:
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

// PutArtifact stores data under (model, name), replacing what was there,
// in one catalog batch committed with pebble.Sync: when it returns nil the
// artifact is durable. data is copied. It is ErrInvalidArgument for an
// empty or too long name, data over MaxArtifactSize or meta that does not
// describe data.
func (db *DB) PutArtifact(model format.Fingerprint, name string, data []byte, meta ArtifactMeta) error {
	var v []byte
	return db.write("put artifact", func() error {
		if err := checkArtifactName(name); err != nil {
			return err
		}
		if len(data) > MaxArtifactSize {
			return fmt.Errorf("%w: artifact %q: %d bytes exceed %d (larger artifacts are out of scope)", ErrInvalidArgument, name, len(data), MaxArtifactSize)
		}
		if err := meta.check(len(data)); err != nil {
			return fmt.Errorf("%w: artifact %q: meta: %v", ErrInvalidArgument, name, err)
		}
		var err error
		v, err = format.Seal(kindArtifact, encodeArtifact(model, name, data, &meta, time.Now().UnixNano()))
		if err != nil {
			return fmt.Errorf("store: artifact %q: %w", name, err)
		}
		return nil
	}, func() error {
		b := db.cat.db.NewBatch()
		defer b.Close()
		_ = b.Set(artifactKey(model, name), v, nil)
		_ = b.Set(artifactIndexKey(model, name), nil, nil)
		if err := db.commit(b); err != nil {
			return fmt.Errorf("put artifact %q: %w", name, err)
		}
		return nil
	})
}

// GetArtifact returns a copy of the data stored under (model, name). It is
// ErrNotFound when no model has an artifact of that name, ErrModelMismatch
// when only other models do: an artifact is never returned for a model it
// was not stored for. A record failing its CRC is ErrCorruption.
func (db *DB) GetArtifact(model format.Fingerprint, name string) ([]byte, error) {
	var data []byte
	_, err := db.artifact(model, name, func(body []byte, info *ArtifactInfo) {
		data = append([]byte{}, body[len(body)-info.Size:]...)
	})
	return data, err
}

// StatArtifact returns the description of the artifact stored under
// (model, name), with GetArtifact's errors.
func (db *DB) StatArtifact(model format.Fingerprint, name string) (ArtifactInfo, error) {
	return db.artifact(model, name, nil)
}

// artifact reads and checks the record of (model, name), calling fn with
// its body (valid during the call) when not nil.
func (db *DB) artifact(model format.Fingerprint, name string, fn func([]byte, *ArtifactInfo)) (ArtifactInfo, error) {
	var info ArtifactInfo
	if err := db.enter(); err != nil {
		return info, err
	}
	defer db.leave()
	if err := checkArtifactName(name); err != nil {
		return info, err
	}
	found, err := db.cat.get(artifactKey(model, name), func(v []byte) error {
		body, err := format.Unseal(kindArtifact, v)
		if err != nil {
			return err
		}
		if info, err = decodeArtifact(body); err != nil {
			return err
		}
		if info.Model != model || info.Name != name {
			return fmt.Errorf("%w: record holds artifact %q of model %s", ErrCorruption, info.Name, info.Model.Short())
		}
		if fn != nil {
			fn(body, &info)
		}
		return nil
	})
	switch {
	case err != nil:
		return info, fmt.Errorf("store: artifact %q of model %s: %w", name, model.Short(), err)
	case !found:
		return info, db.artifactMissing(model, name)
	}
	return info, nil
}

// artifactMissing is ErrModelMismatch when another model has an artifact
// named name, else ErrNotFound.
func (db *DB) artifactMissing(model format.Fingerprint, name string) error {
	p := nsPrefix(tagArtifact, name, 0)
	var other *format.Fingerprint
	err := db.cat.scan(p, prefixEnd(p), func(k, _ []byte) (bool, error) {
		if len(k) == len(p)+len(model) {
			fp := format.Fingerprint(k[len(p):])
			other = &fp
			return false, nil
		}
		return true, nil
	})
	switch {
	case err != nil:
		return err
	case other != nil:
		return fmt.Errorf("%w: artifact %q is stored for model %s, not %s", ErrModelMismatch, name, other.Short(), model.Short())
	}
	return fmt.Errorf("%w: artifact %q of model %s", ErrNotFound, name, model.Short())
}

// ListArtifacts returns the names of model's artifacts in byte order.
func (db *DB) ListArtifacts(model format.Fingerprint) ([]string, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	p := artifactIndexKey(model, "")
	var names []string
	err := db.cat.scan(p, prefixEnd(p), func(k, _ []byte) (bool, error) {
		names = append(names, string(k[len(p):]))
		return true, nil
	})
	return names, err
}

// DeleteArtifact removes the artifact stored under (model, name) in one
// synced batch, with GetArtifact's ErrNotFound and ErrModelMismatch.
func (db *DB) DeleteArtifact(model format.Fingerprint, name string) error {
	return db.write("delete artifact", func() error { return checkArtifactName(name) }, func() error {
		found, err := db.cat.has(artifactKey(model, name))
		switch {
		case err != nil:
			return err
		case !found:
			return db.artifactMissing(model, name)
		}
		b := db.cat.db.NewBatch()
		defer b.Close()
		_ = b.Delete(artifactKey(model, name), nil)
		_ = b.Delete(artifactIndexKey(model, name), nil)
		if err := db.commit(b); err != nil {
			return fmt.Errorf("delete artifact %q: %w", name, err)
		}
		return nil
	})
}

// encodeArtifact returns the body of an artifact record.
func encodeArtifact(model format.Fingerprint, name string, data []byte, m *ArtifactMeta, created int64) []byte {
	n := artifactFixed + 8*len(m.Shape) + len(name) + len(m.Note) + len(data)
	b := make([]byte, artifactFixed, n)
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

// decodeArtifact parses an artifact body (its frame already checked).
func decodeArtifact(b []byte) (ArtifactInfo, error) {
	var info ArtifactInfo
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: artifact record: %s", ErrCorruption, fmt.Sprintf(f, args...))
	}
	if len(b) < artifactFixed {
		return info, bad("%d bytes, shorter than its %d fixed bytes", len(b), artifactFixed)
	}
	le := binary.LittleEndian
	info.Model = format.Fingerprint(b[:32])
	info.CreatedAt = time.Unix(0, int64(le.Uint64(b[32:])))
	size, nameLen, noteLen := le.Uint64(b[40:]), int(le.Uint16(b[48:])), int(le.Uint16(b[50:]))
	rank := int(b[53])
	info.Meta.DType = format.DType(b[52])
	switch {
	case le.Uint16(b[54:]) != 0:
		return info, bad("reserved field %#x", le.Uint16(b[54:]))
	case rank > maxArtifactRank || nameLen > format.MaxNameLen || noteLen > format.MaxNameLen || size > MaxArtifactSize:
		return info, bad("rank %d, name %d bytes, note %d bytes, data %d bytes out of range", rank, nameLen, noteLen, size)
	case uint64(len(b)) != uint64(artifactFixed+8*rank+nameLen+noteLen)+size:
		return info, bad("%d bytes, its lengths add up to %d", len(b), uint64(artifactFixed+8*rank+nameLen+noteLen)+size)
	}
	off := artifactFixed
	for range rank {
		d := le.Uint64(b[off:])
		if d > math.MaxInt32 {
			return info, bad("dimension %d", d)
		}
		info.Meta.Shape = append(info.Meta.Shape, int(d))
		off += 8
	}
	info.Name = string(b[off : off+nameLen])
	info.Meta.Note = string(b[off+nameLen : off+nameLen+noteLen])
	info.Size = int(size)
	if err := info.Meta.check(info.Size); err != nil {
		return info, bad("meta: %v", err)
	}
	return info, nil
}
