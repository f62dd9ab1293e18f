package store

import (
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/artifact"
)

// Artifacts are the model-side objects kvstore serves beside packets:
// KV Packet's adapter soft tokens, SeKV's router W, tau and rank-gate
// weights. Each is a named byte string bound to one model fingerprint and
// kept whole in the catalog, framed as record kind "KVAR" (drawn in
// format/artifact.go; keys and records in store/internal/artifact).
// Data is at most MaxArtifactSize bytes.
const MaxArtifactSize = format.MaxArtifactSize

// ArtifactMeta describes an artifact's data for its readers. The store
// checks it (a dtype's Shape must account for every byte) but does not
// otherwise interpret it. It is format.ArtifactMeta, whose fields go doc
// of package format shows.
type ArtifactMeta = format.ArtifactMeta

// ArtifactInfo is an artifact's description as stored.
type ArtifactInfo struct {
	// Model and Name are what it is stored under.
	Model format.Fingerprint
	Name  string
	// Meta describes the data, as PutArtifact was given it.
	Meta ArtifactMeta
	// Size is the bytes of data.
	Size int
	// CreatedAt is when PutArtifact stored it.
	CreatedAt time.Time
}

// fromArtifactInfo is artifact's description as the store's (the same
// fields).
func fromArtifactInfo(i artifact.Info) ArtifactInfo { return ArtifactInfo(i) }

// PutArtifact stores data under (model, name), replacing what was there,
// in one catalog batch committed with pebble.Sync: when it returns nil the
// artifact is durable. data is copied. It is ErrInvalidArgument for an
// empty or too long name, data over MaxArtifactSize or meta that does not
// describe data.
func (db *DB) PutArtifact(model format.Fingerprint, name string, data []byte, meta ArtifactMeta) error {
	var v []byte
	return db.write("put artifact", func() (err error) {
		if err := artifact.Check(name, data, &meta); err != nil {
			return err
		}
		v, err = artifact.Record(model, name, data, &meta, time.Now().UnixNano())
		return err
	}, func() error {
		b := db.cat.DB.NewBatch()
		defer b.Close()
		artifact.Set(b, model, name, v)
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
	_, err := db.artifact(model, name, func(body []byte, info *artifact.Info) {
		data = append([]byte{}, body[len(body)-info.Size:]...)
	})
	return data, err
}

// StatArtifact returns the description of the artifact stored under
// (model, name), with GetArtifact's errors.
func (db *DB) StatArtifact(model format.Fingerprint, name string) (ArtifactInfo, error) {
	info, err := db.artifact(model, name, nil)
	return fromArtifactInfo(info), err
}

// artifact reads and checks the record of (model, name), calling fn with
// its body (valid during the call) when not nil.
func (db *DB) artifact(model format.Fingerprint, name string, fn func([]byte, *artifact.Info)) (artifact.Info, error) {
	if err := db.enter(); err != nil {
		return artifact.Info{}, err
	}
	defer db.leave()
	if err := artifact.CheckName(name); err != nil {
		return artifact.Info{}, err
	}
	info, found, err := artifact.Get(db.cat, model, name, fn)
	if err == nil && !found {
		err = artifact.Missing(db.cat, model, name, ErrModelMismatch, ErrNotFound)
	}
	return info, err
}

// ListArtifacts returns the names of model's artifacts in byte order.
func (db *DB) ListArtifacts(model format.Fingerprint) ([]string, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	return artifact.List(db.cat, model)
}

// DeleteArtifact removes the artifact stored under (model, name) in one
// synced batch, with GetArtifact's ErrNotFound and ErrModelMismatch.
func (db *DB) DeleteArtifact(model format.Fingerprint, name string) error {
	return db.write("delete artifact", func() error { return artifact.CheckName(name) }, func() error {
		found, err := artifact.Has(db.cat, model, name)
		switch {
		case err != nil:
			return err
		case !found:
			return artifact.Missing(db.cat, model, name, ErrModelMismatch, ErrNotFound)
		}
		b := db.cat.DB.NewBatch()
		defer b.Close()
		artifact.Delete(b, model, name)
		if err := db.commit(b); err != nil {
			return fmt.Errorf("delete artifact %q: %w", name, err)
		}
		return nil
	})
}
