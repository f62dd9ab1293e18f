// Package artifact is the artifacts' catalog records: the model-side
// objects kvstore serves beside packets (KV Packet's adapter soft tokens,
// SeKV's router W, tau and rank-gate weights), each a named byte string
// bound to one model fingerprint and kept whole in the catalog. It checks
// names and data (CheckName, Check), frames and parses a record (Record,
// Decode, Read), and reads, lists and batches them in the catalog it is
// given (Get, Has, Other, List, Each, Set, Delete); the store admits each call and
// commits its batches.
//
// A record is kind "KVAR", its body drawn in format/artifact.go; the keys
// are store/internal/catalog's:
//
//	key   'a' | name len u16 BE | name | model fp (32)   -> the record
//	      'A' | model fp (32) | name                     -> empty (List)
//
// Model and name are repeated in the body, so a value read under another
// key is detected (Read). Data is at most format.MaxArtifactSize bytes.
package artifact

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// The errors are format's, so that errors.Is works with the store's names
// for them too.
var (
	ErrInvalidArgument = format.ErrInvalidArgument
	ErrCorruption      = format.ErrCorruption
)

// Info is an artifact's description as stored.
type Info struct {
	Model     format.Fingerprint
	Name      string
	Meta      format.ArtifactMeta
	Size      int // bytes of data
	CreatedAt time.Time
}

// CheckName accepts a name of 1 to format.MaxNameLen bytes.
func CheckName(name string) error {
	if name == "" || len(name) > format.MaxNameLen {
		return fmt.Errorf("%w: artifact name of %d bytes, want 1 to %d", ErrInvalidArgument, len(name), format.MaxNameLen)
	}
	return nil
}

// Check accepts what may be stored under name: a good name, data of at
// most format.MaxArtifactSize bytes, and meta that describes data.
func Check(name string, data []byte, meta *format.ArtifactMeta) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if len(data) > format.MaxArtifactSize {
		return fmt.Errorf("%w: artifact %q: %d bytes exceed %d (larger artifacts are out of scope)", ErrInvalidArgument, name, len(data), format.MaxArtifactSize)
	}
	if err := meta.Check(len(data)); err != nil {
		return fmt.Errorf("%w: artifact %q: meta: %v", ErrInvalidArgument, name, err)
	}
	return nil
}

// Record returns the framed record of data stored under (model, name),
// created at created (Unix ns).
func Record(model format.Fingerprint, name string, data []byte, meta *format.ArtifactMeta, created int64) ([]byte, error) {
	v, err := format.Seal(format.KindArtifact, Encode(model, name, data, meta, created))
	if err != nil {
		return nil, fmt.Errorf("store: artifact %q: %w", name, err)
	}
	return v, nil
}

// Encode returns the body of an artifact record.
func Encode(model format.Fingerprint, name string, data []byte, m *format.ArtifactMeta, created int64) []byte {
	return format.EncodeArtifact(model, name, data, m, created)
}

// Decode parses an artifact body (its frame already checked).
func Decode(b []byte) (Info, error) {
	a, err := format.DecodeArtifact(b)
	info := Info{Model: a.Model, Name: a.Name, Meta: a.Meta, Size: a.Size, CreatedAt: time.Unix(0, a.CreatedUnixNs)}
	return info, err
}

// Read checks the record v read under (model, name) and returns its body
// (aliasing v) and description: a bad frame or body, or one holding
// another artifact, is ErrCorruption.
func Read(v []byte, model format.Fingerprint, name string) ([]byte, Info, error) {
	body, err := format.Unseal(format.KindArtifact, v)
	if err != nil {
		return nil, Info{}, err
	}
	info, err := Decode(body)
	if err != nil {
		return nil, info, err
	}
	if info.Model != model || info.Name != name {
		return nil, info, fmt.Errorf("%w: record holds artifact %q of model %s", ErrCorruption, info.Name, info.Model.Short())
	}
	return body, info, nil
}

// Get reads the record of (model, name) from cat, calling fn with its body
// (valid during the call) when not nil; found is false when there is none.
func Get(cat *catalog.Catalog, model format.Fingerprint, name string, fn func([]byte, *Info)) (info Info, found bool, err error) {
	found, err = cat.Get(catalog.ArtifactKey(model, name), func(v []byte) error {
		body, i, err := Read(v, model, name)
		if info = i; err != nil {
			return err
		}
		if fn != nil {
			fn(body, &info)
		}
		return nil
	})
	if err != nil {
		return info, false, fmt.Errorf("store: artifact %q of model %s: %w", name, model.Short(), err)
	}
	return info, found, nil
}

// Has reports whether cat holds a record of (model, name), without
// reading it.
func Has(cat *catalog.Catalog, model format.Fingerprint, name string) (bool, error) {
	return cat.Has(catalog.ArtifactKey(model, name))
}

// Other returns a model other than model that has an artifact named name,
// or nil when none has.
func Other(cat *catalog.Catalog, model format.Fingerprint, name string) (*format.Fingerprint, error) {
	p := catalog.NSPrefix(catalog.TagArtifact, name, 0)
	var other *format.Fingerprint
	err := cat.Scan(p, catalog.PrefixEnd(p), func(k, _ []byte) (bool, error) {
		if len(k) == len(p)+len(model) {
			fp := format.Fingerprint(k[len(p):])
			other = &fp
			return false, nil
		}
		return true, nil
	})
	return other, err
}

// List returns the names of model's artifacts in byte order.
func List(cat *catalog.Catalog, model format.Fingerprint) ([]string, error) {
	p := catalog.ArtifactIndexKey(model, "")
	var names []string
	err := cat.Scan(p, catalog.PrefixEnd(p), func(k, _ []byte) (bool, error) {
		names = append(names, string(k[len(p):]))
		return true, nil
	})
	return names, err
}

// Set adds to b the record rec (Record's) of (model, name) and its index
// entry.
func Set(b *pebble.Batch, model format.Fingerprint, name string, rec []byte) {
	_ = b.Set(catalog.ArtifactKey(model, name), rec, nil)
	_ = b.Set(catalog.ArtifactIndexKey(model, name), nil, nil)
}

// Delete adds to b the deletion of (model, name)'s record and index entry.
func Delete(b *pebble.Batch, model format.Fingerprint, name string) {
	_ = b.Delete(catalog.ArtifactKey(model, name), nil)
	_ = b.Delete(catalog.ArtifactIndexKey(model, name), nil)
}

// Missing is the error for a read of (model, name) that found no record:
// an error wrapping mismatch (the store's ErrModelMismatch) when another
// model has an artifact named name, else one wrapping notFound.
func Missing(cat *catalog.Catalog, model format.Fingerprint, name string, mismatch, notFound error) error {
	other, err := Other(cat, model, name)
	switch {
	case err != nil:
		return err
	case other != nil:
		return fmt.Errorf("%w: artifact %q is stored for model %s, not %s", mismatch, name, other.Short(), model.Short())
	}
	return fmt.Errorf("%w: artifact %q of model %s", notFound, name, model.Short())
}
