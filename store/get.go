package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// Get returns a View of packet id in namespace ns, stored for model. It is
// ErrNotFound if the namespace has no such packet, and ErrModelMismatch if
// it has one stored for another model: a packet is never served for a model
// it was not written for. Get reads only the catalog: chunks are read and
// verified when the View returns them. Release the View when done.
func (db *DB) Get(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) (*View, error) {
	defer db.st.getLatency.timer()()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get packet %s: %w", id.Short(), err)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	db.st.gets.Add(1)
	v, err := db.get(ns, model, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrModelMismatch) {
			db.st.misses.Add(1)
		}
		return nil, err
	}
	db.st.hits.Add(1)
	db.st.views.Add(1)
	db.touch(ns, id)
	return fromView(v), nil
}

// maxGetAttempts bounds Get's retries when a packet's blob file is retired
// between reading its header and pinning the file (compaction repoints the
// header first, so a retry finds the new place).
const maxGetAttempts = 4

func (db *DB) get(ns string, model format.Fingerprint, id format.PacketID) (*view.View, error) {
	return view.Open(maxGetAttempts, func() (*format.PacketHeader, error) {
		h, err := db.header(ns, id)
		if err == nil && h.Model != model {
			err = fmt.Errorf("%w: packet %s in namespace %q was stored for model %s, not %s",
				ErrModelMismatch, id.Short(), ns, h.Model.Short(), model.Short())
		}
		return h, err
	}, db.file, db.viewOptions())
}

// header reads and checks packet id's header in namespace ns.
func (db *DB) header(ns string, id format.PacketID) (*format.PacketHeader, error) {
	if err := format.CheckNamespace(ns); err != nil {
		return nil, err
	}
	h, found, err := db.cat.Header(ns, id)
	if err == nil && !found {
		err = fmt.Errorf("%w: packet %s in namespace %q", ErrNotFound, id.Short(), ns)
	}
	return h, err
}

// Has reports whether packet id is stored in namespace ns for model. A
// packet stored there for another model is (false, ErrModelMismatch).
func (db *DB) Has(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := db.enter(); err != nil {
		return false, err
	}
	defer db.leave()
	if err := format.CheckNamespace(ns); err != nil {
		return false, err
	}
	indexed, other, err := db.cat.Stored(ns, model, id)
	if err != nil || !other {
		return indexed, err
	}
	return false, fmt.Errorf("%w: packet %s in namespace %q", ErrModelMismatch, id.Short(), ns)
}

// Model returns the model spec stored under fingerprint fp (every Put stores
// its model's spec), or ErrNotFound.
func (db *DB) Model(fp format.Fingerprint) (*format.ModelSpec, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	m, found, err := db.cat.CachedModel(&db.models, fp)
	if err == nil && !found {
		err = fmt.Errorf("%w: model spec %s", ErrNotFound, fp.Short())
	}
	return m, err
}

// addModel adds model spec m, fingerprint fp, to b unless it is catalogued.
func (db *DB) addModel(b *pebble.Batch, fp format.Fingerprint, m *format.ModelSpec) error {
	if _, ok := db.models.Load(fp); ok {
		return nil
	}
	return db.cat.AddModel(b, fp, m)
}
