package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Delete removes packet id of namespace ns, stored for model, from the
// catalog in one synced batch: afterwards Get and List no longer find it.
// Its extent's bytes become dead (see Stats and BlobFiles); Views already
// taken keep reading them until released, and space is reclaimed by
// compaction. It is ErrNotFound if absent, ErrModelMismatch if stored for
// another model.
func (db *DB) Delete(ns string, model format.Fingerprint, id format.PacketID) error {
	return db.write("delete", nil, func() error { return db.deleteLocked(ns, model, id) })
}

// deleteLocked is Delete; the writer lock is held.
func (db *DB) deleteLocked(ns string, model format.Fingerprint, id format.PacketID) error {
	h, err := db.header(ns, id)
	if err != nil {
		return err
	}
	if h.Model != model {
		return fmt.Errorf("%w: delete packet %s in namespace %q: stored for model %s, not %s",
			ErrModelMismatch, id.Short(), ns, h.Model.Short(), model.Short())
	}
	r, ok := db.record(h.BlobFile)
	if !ok || r.LiveBytes < h.ExtentLength || r.LiveExtents == 0 {
		return fmt.Errorf("%w: delete packet %s: blob file %06d's record does not account for its extent",
			ErrCorruption, id.Short(), h.BlobFile)
	}
	r.LiveBytes -= h.ExtentLength
	r.DeadBytes += h.ExtentLength
	r.LiveExtents--
	b := db.cat.DB.NewBatch()
	defer b.Close()
	_ = b.Delete(catalog.HeaderKey(ns, id), nil)
	_ = b.Delete(catalog.IndexKey(ns, h.Model, id), nil)
	_ = b.Set(catalog.BlobFileKey(r.Num), encodeBlobRecord(&r), nil)
	deleteOpsKeys(b, ns, id)
	if err := db.commit(b); err != nil {
		return fmt.Errorf("delete packet %s: %w", id.Short(), err)
	}
	db.setRecords(r)
	db.st.deletes.Add(1)
	db.afterDelete(h, EventPacketRemoved)
	return nil
}
