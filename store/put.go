package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/packet"
)

// Put stores p and returns its id, format.ComputePacketID(namespace, model
// fingerprint, adapter id, token ids). When it returns nil the packet is
// durable: its extent, led by a put record holding its catalog entries, was
// fdatasynced before the catalog batch naming it was committed. That batch
// does not wait for a sync of its own: if a crash loses it, the next Open
// finds the put record past the catalog's end of the file and applies it
// again (reconcile.go), so one device flush makes a Put durable.
//
// Put is idempotent: a packet already stored is not written again and its
// id is returned. That holds across variants: the id does not depend on
// p.Keep, so once a document is stored (whole or pruned) a Put of another
// variant of it is a no-op, and the first variant stored stays until it is
// deleted. A keep-set that does not fit the packet is ErrInvalidArgument. Arguments that do not describe a packet (lengths, shapes,
// no tokens, a negative base position) are ErrInvalidArgument and nothing
// is written. Keys given at a base position other than 0 are rotated to 0
// in a copy before they are stored. p's buffers are only read, and not kept.
//
// ctx is checked before anything is written: a Put whose context is done
// writes nothing and returns its error; once the write starts it runs to
// its end (an extent half written is never acknowledged anyway).
func (db *DB) Put(ctx context.Context, p *Packet) (format.PacketID, error) {
	defer db.st.putLatency.timer()()
	var (
		d        *packet.Desc
		id       format.PacketID
		fp       format.Fingerprint
		chunkLen uint64
	)
	err := db.write("put", func() (err error) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		d = p.desc()
		if chunkLen, err = d.Check(); err != nil {
			return err
		}
		fp = p.Model.Fingerprint()
		id = format.ComputePacketID(p.Namespace, fp, p.AdapterID, p.TokenIDs)
		return nil
	}, func() error {
		if err := db.checkAdapter(p.AdapterID, fp, id); err != nil {
			return err
		}
		return db.putLocked(d, chunkLen, fp, id)
	})
	return id, err
}

// checkAdapter refuses a packet whose adapter the store does not hold for
// its model: a packet's adapter rows are only as good as the adapter they
// came from (package adapter). It runs under the writer lock, so a
// concurrent DeleteArtifact cannot slip between the check and the write.
func (db *DB) checkAdapter(adapterID string, fp format.Fingerprint, id format.PacketID) error {
	if adapterID == "" {
		return nil
	}
	if _, err := db.StatArtifact(fp, AdapterArtifact(adapterID)); err != nil {
		return fmt.Errorf("put packet %s: its adapter: %w", id.Short(), err)
	}
	return nil
}

// putLocked is Put once d is checked and its id known; the writer lock is
// held.
func (db *DB) putLocked(d *packet.Desc, chunkLen uint64, fp format.Fingerprint, id format.PacketID) error {
	if ok, err := db.cat.Has(catalog.HeaderKey(d.Namespace, id)); err != nil || ok {
		if ok {
			db.st.putsDeduped.Add(1)
		}
		return err
	}
	// Encoded first, so that room is made for the extent as it will be
	// stored (compressed chunks, a pruned packet's positions at their own
	// size), and a packet the codec refuses evicts nothing.
	e, err := packet.Encode(d, chunkLen, fp, id, db.w.Seq, putRecords)
	if err != nil {
		return err
	}
	if err := db.makeRoom(e.Layout.Length); err != nil {
		return fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	if err := db.put(&e); err != nil {
		return fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	return nil
}

// AdapterArtifact is the artifact name under which a model's KV Packet
// adapter id is stored; Put refuses a packet naming an adapter id that has
// no such artifact for its model (ErrNotFound, or ErrModelMismatch when
// only another model has it).
func AdapterArtifact(id string) string { return "adapter/" + id }

// put writes, syncs and catalogues the extent of a packet known to be
// new.
func (db *DB) put(e *packet.Extent) error {
	var h *format.PacketHeader
	return db.appendExtent(e.Layout.Length, false, func(a *bloblog.Active) (n uint64, err error) {
		h, err = packet.Write(a, db.rawFd(a.F), e, db.w.Seq)
		return e.Layout.Length, err
	}, func(a *bloblog.Active, n uint64) error {
		m := e.Desc.Model
		recs, err := db.commitPut(h, m, a, n)
		if err != nil {
			return err
		}
		db.w.Committed(n)
		db.w.Seq++
		db.setRecords(recs...)
		spec := *m
		db.models.LoadOrStore(e.Model, &spec)
		db.st.puts.Add(1)
		db.afterPut(h)
		return nil
	})
}

// appendExtent appends an extent of need bytes at the end of the active
// file (despite a full disk's hold, space.go, with despiteHold), written by
// write, fdatasyncs it and catalogues it with commit.
// On error the writer abandons the file (the next extent overwrites the
// bytes) and a file it started is dropped.
func (db *DB) appendExtent(need uint64, despiteHold bool, write func(*bloblog.Active) (uint64, error), commit func(*bloblog.Active, uint64) error) error {
	prepare := db.w.Prepare
	if despiteHold {
		prepare = db.w.PrepareDespiteHold
	}
	a, err := prepare(need)
	if err != nil {
		return err
	}
	if a.Fresh {
		db.addFile(blobRecord{Num: a.Num, Size: a.End})
	}
	n, err := write(a)
	if err == nil {
		db.st.bytesWritten.Add(n)
		if err = timed(&db.st.blobSyncs, &db.st.blobSyncNanos, a.F.SyncData); err != nil {
			err = fmt.Errorf("store: sync blob file %s: %w", a.Path, err)
		} else {
			err = commit(a, n)
		}
	}
	if err != nil {
		if a.Fresh {
			db.dropFile(a.Num)
		}
		db.w.Abandon()
	}
	return err
}

// putRecords is false only in tests that write packet extents as format
// 1.0 did, without a put record.
var putRecords = true

// commitPut commits, in one batch that does not wait for a sync
// (commitLogged: the put record just synced holds it), h and its extent's records
// (packet.AddPut) and model spec m if it is new; it returns the records
// it wrote.
func (db *DB) commitPut(h *format.PacketHeader, m *format.ModelSpec, a *bloblog.Active, n uint64) ([]blobRecord, error) {
	b := db.cat.DB.NewBatch()
	defer b.Close()
	if err := db.addModel(b, h.Model, m); err != nil {
		return nil, err
	}
	recs, err := packet.AddPut(b, h, db.appended(a, n))
	if err != nil {
		return nil, err
	}
	if err := db.commitLogged(b); err != nil {
		return nil, err
	}
	return recs, nil
}

// appended describes n bytes just written at the end of a, for the batch
// that catalogues them (writer lock held).
func (db *DB) appended(a *bloblog.Active, n uint64) packet.Appended {
	return packet.Appended{A: a, N: n, Sealed: db.w.Sealed, Seq: db.w.Seq, Record: db.record}
}
