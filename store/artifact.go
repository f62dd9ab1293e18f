package store

import (
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Artifacts are the model-side objects kvstore serves beside packets:
// KV Packet's adapter soft tokens, SeKV's router W, tau and rank-gate
// weights. Each is a named byte string bound to one model fingerprint and
// kept whole in the catalog, framed as record kind "KVAR" (drawn in
// format/artifact.go):
//
//	key   'a' | name len u16 BE | name | model fp (32)   -> the record
//	      'A' | model fp (32) | name                     -> empty (ListArtifacts)
//
// Model and name are repeated in the body, so a value read under another
// key is detected. Data is at most MaxArtifactSize bytes.
const MaxArtifactSize = format.MaxArtifactSize

const (
	artifactFixed   = format.ArtifactFixedSize
	maxArtifactRank = format.MaxArtifactRank
)

var kindArtifact = format.KindArtifact

// ArtifactMeta describes an artifact's data for its readers. The store
// checks it (a dtype's Shape must account for every byte) but does not
// otherwise interpret it.
type ArtifactMeta = format.ArtifactMeta

// ArtifactInfo is an artifact's description as stored.
type ArtifactInfo struct {
	Model     format.Fingerprint
	Name      string
	Meta      ArtifactMeta
	Size      int // bytes of data
	CreatedAt time.Time
}

func checkArtifactName(name string) error {
	if name == "" || len(name) > format.MaxNameLen {
		return fmt.Errorf("%w: artifact name of %d bytes, want 1 to %d", ErrInvalidArgument, len(name), format.MaxNameLen)
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
		if err := meta.Check(len(data)); err != nil {
			return fmt.Errorf("%w: artifact %q: meta: %v", ErrInvalidArgument, name, err)
		}
		var err error
		v, err = format.Seal(kindArtifact, encodeArtifact(model, name, data, &meta, time.Now().UnixNano()))
		if err != nil {
			return fmt.Errorf("store: artifact %q: %w", name, err)
		}
		return nil
	}, func() error {
		b := db.cat.DB.NewBatch()
		defer b.Close()
		_ = b.Set(catalog.ArtifactKey(model, name), v, nil)
		_ = b.Set(catalog.ArtifactIndexKey(model, name), nil, nil)
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
	found, err := db.cat.Get(catalog.ArtifactKey(model, name), func(v []byte) error {
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
	p := catalog.NSPrefix(catalog.TagArtifact, name, 0)
	var other *format.Fingerprint
	err := db.cat.Scan(p, catalog.PrefixEnd(p), func(k, _ []byte) (bool, error) {
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
	p := catalog.ArtifactIndexKey(model, "")
	var names []string
	err := db.cat.Scan(p, catalog.PrefixEnd(p), func(k, _ []byte) (bool, error) {
		names = append(names, string(k[len(p):]))
		return true, nil
	})
	return names, err
}

// DeleteArtifact removes the artifact stored under (model, name) in one
// synced batch, with GetArtifact's ErrNotFound and ErrModelMismatch.
func (db *DB) DeleteArtifact(model format.Fingerprint, name string) error {
	return db.write("delete artifact", func() error { return checkArtifactName(name) }, func() error {
		found, err := db.cat.Has(catalog.ArtifactKey(model, name))
		switch {
		case err != nil:
			return err
		case !found:
			return db.artifactMissing(model, name)
		}
		b := db.cat.DB.NewBatch()
		defer b.Close()
		_ = b.Delete(catalog.ArtifactKey(model, name), nil)
		_ = b.Delete(catalog.ArtifactIndexKey(model, name), nil)
		if err := db.commit(b); err != nil {
			return fmt.Errorf("delete artifact %q: %w", name, err)
		}
		return nil
	})
}

// encodeArtifact returns the body of an artifact record.
func encodeArtifact(model format.Fingerprint, name string, data []byte, m *ArtifactMeta, created int64) []byte {
	return format.EncodeArtifact(model, name, data, m, created)
}

// decodeArtifact parses an artifact body (its frame already checked).
func decodeArtifact(b []byte) (ArtifactInfo, error) {
	a, err := format.DecodeArtifact(b)
	info := ArtifactInfo{Model: a.Model, Name: a.Name, Meta: a.Meta, Size: a.Size, CreatedAt: time.Unix(0, a.CreatedUnixNs)}
	return info, err
}
