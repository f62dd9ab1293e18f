package store

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/packet"
)

// Delete removes packet id of namespace ns, stored for model: it appends a
// tombstone extent to the blob log and fdatasyncs it (so that a catalog
// rebuilt from the blob log keeps the packet deleted), then removes the
// packet from the catalog in one batch: afterwards Get and List no longer
// find it. The tombstone's fdatasync makes the delete durable; the batch
// does not wait for a sync of its own (a crash that loses it leaves the
// tombstone past the catalog's end, which the next Open applies again).
// Its extent's bytes become dead (see Stats and BlobFiles); Views already
// taken keep reading them until released, and space is reclaimed by
// compaction. It is ErrNotFound if absent, ErrModelMismatch if stored for
// another model.
func (db *DB) Delete(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) error {
	return db.write("delete", ctx.Err, func() error { return db.deleteLocked(ns, model, id) })
}

// deleteLocked is Delete; the writer lock is held.
func (db *DB) deleteLocked(ns string, model format.Fingerprint, id format.PacketID) error {
	h, err := db.storedFor("delete ", ns, model, id)
	if err != nil {
		return err
	}
	r, ok := db.record(h.BlobFile)
	if !ok || r.LiveBytes < h.ExtentLength || r.LiveExtents == 0 {
		return fmt.Errorf("%w: delete packet %s: blob file %06d's record does not account for its extent",
			ErrCorruption, id.Short(), h.BlobFile)
	}
	t := &format.Tombstone{Seq: db.w.Seq, Namespace: ns, ID: id, Model: h.Model}
	err = db.appendTombstones([]*format.Tombstone{t}, []*format.PacketHeader{h}, func(b *pebble.Batch) {
		deleteOpsKeys(b, h.Namespace, h.ID)
	})
	if err != nil {
		return fmt.Errorf("delete packet %s: %w", id.Short(), err)
	}
	db.st.deletes.Add(1)
	db.afterDelete(h, EventPacketRemoved)
	return nil
}

// storedFor reads packet id's header in namespace ns, refusing one stored
// for another model than model with ErrModelMismatch (op: the call, for
// the error, "" or ending in a space).
func (db *DB) storedFor(op, ns string, model format.Fingerprint, id format.PacketID) (*format.PacketHeader, error) {
	h, err := db.header(ns, id)
	if err == nil && h.Model != model {
		return nil, fmt.Errorf("%w: %spacket %s in namespace %q: stored for model %s, not %s",
			ErrModelMismatch, op, id.Short(), ns, h.Model.Short(), model.Short())
	}
	return h, err
}

// appendTombstones writes ts (sequences from db.w.Seq on), the tombstones
// of hs, as consecutive tombstone extents at the end of the active file,
// fdatasyncs them, and commits in one batch (commitLogged: the tombstones
// hold it) the deletion of hs
// (packet.AddDeletes) with what add puts in it (the packets' access and
// pin records), then installs the records.
// A tombstone frees room: it is written even while a full disk holds new
// data back (space.go), or a full store could not be emptied.
func (db *DB) appendTombstones(ts []*format.Tombstone, hs []*format.PacketHeader, add func(b *pebble.Batch)) error {
	if len(ts) == 0 || len(ts) != len(hs) {
		return fmt.Errorf("%w: %d tombstones for %d packets", ErrInvalidArgument, len(ts), len(hs)) // a caller's bug
	}
	k := uint64(len(ts))
	write := func(a *bloblog.Active) (uint64, error) { return packet.WriteTombstones(a, ts) }
	commit := func(a *bloblog.Active, n uint64) error {
		b := db.cat.DB.NewBatch()
		defer b.Close()
		x := db.appended(a, n)
		x.Seq += k - 1
		add(b)
		out := packet.AddDeletes(b, hs, x)
		if err := db.commitLogged(b); err != nil {
			return err
		}
		db.w.Committed(n)
		db.w.Seq += k
		db.setRecords(out...)
		return nil
	}
	return db.appendExtent(k*format.Alignment, true, write, commit)
}
