package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Put stores p and returns its id, format.ComputePacketID(namespace, model
// fingerprint, adapter id, token ids). When it returns nil the packet is
// durable: its extent was fdatasynced before the catalog batch naming it
// was committed with pebble.Sync.
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
		id       format.PacketID
		fp       format.Fingerprint
		chunkLen uint64
	)
	err := db.write("put", func() (err error) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		if chunkLen, err = p.check(); err != nil {
			return err
		}
		fp = p.Model.Fingerprint()
		id = format.ComputePacketID(p.Namespace, fp, p.AdapterID, p.TokenIDs)
		return nil
	}, func() error {
		if err := db.checkAdapter(p.AdapterID, fp, id); err != nil {
			return err
		}
		return db.putLocked(p, chunkLen, fp, id)
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

// putLocked is Put once p is checked and its id known; the writer lock is
// held.
func (db *DB) putLocked(p *Packet, chunkLen uint64, fp format.Fingerprint, id format.PacketID) error {
	if ok, err := db.cat.Has(catalog.HeaderKey(p.Namespace, id)); err != nil || ok {
		if ok {
			db.st.putsDeduped.Add(1)
		}
		return err
	}
	q, err := p.compacted().normalized()
	if err != nil {
		return err
	}
	// Encoded first, so that room is made for the extent as it will be
	// stored (compressed chunks, a pruned packet's positions at their own
	// size), and a packet the codec refuses evicts nothing.
	q, lay, err := encodeChunks(q, chunkLen)
	if err != nil {
		return err
	}
	if err := reservePutRecord(q, &lay, fp, id, db.w.Seq); err != nil {
		return fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	if err := db.makeRoom(lay.Length); err != nil {
		return fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	if err := db.put(q, &lay, fp, id); err != nil {
		return fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	return nil
}

// AdapterArtifact is the artifact name under which a model's KV Packet
// adapter id is stored; Put refuses a packet naming an adapter id that has
// no such artifact for its model (ErrNotFound, or ErrModelMismatch when
// only another model has it).
func AdapterArtifact(id string) string { return "adapter/" + id }

// put writes, syncs and catalogues a packet known to be new, encoded and
// laid out as lay.
func (db *DB) put(p *Packet, lay *bloblog.Layout, fp format.Fingerprint, id format.PacketID) error {
	a, err := db.w.Prepare(lay.Length)
	if err != nil {
		return err
	}
	if a.Fresh {
		db.addFile(BlobFileInfo{Num: a.Num, Size: a.End})
	}
	if err := db.append(a, lay, p, fp, id); err != nil {
		if a.Fresh {
			db.dropFile(a.Num)
		}
		db.w.Abandon()
		return err
	}
	return nil
}

// putRecords is false only in tests that write packet extents as format
// 1.0 did, without a put record.
var putRecords = true

// reservePutRecord makes room at the start of the extent laid out as lay
// for the put record (format/put_record.go) that will lead it. The
// record's length does not depend on the values of the CRCs, offsets and
// lengths it holds, so a probe header at a stand-in position measures it.
func reservePutRecord(p *Packet, lay *bloblog.Layout, fp format.Fingerprint, id format.PacketID, seq uint64) error {
	if !putRecords {
		return nil
	}
	if err := lay.SetPrefix(format.ChunkAlignment); err != nil {
		return err
	}
	probe := newHeader(p, fp, id, 1, format.BlobHeaderSize, lay, make([]uint32, lay.Chunks))
	rec, err := format.EncodePutRecord(seq, probe, p.Model)
	if err != nil {
		return err
	}
	return lay.SetPrefix(uint64(len(rec)))
}

// append writes the extent at the end of a, led by its put record, syncs
// it and commits the batch.
func (db *DB) append(a *bloblog.Active, lay *bloblog.Layout, p *Packet, fp format.Fingerprint, id format.PacketID) error {
	off := a.End
	var h *format.PacketHeader
	lead := func(crcs []uint32) ([]byte, error) {
		h = newHeader(p, fp, id, a.Num, off, lay, crcs)
		return format.EncodePutRecord(db.w.Seq, h, p.Model)
	}
	crcs, err := bloblog.WriteExtent(a.F, db.rawFd(a.F), a.Path, off, lay, p.chunkSource, lead, id)
	if err != nil {
		return err
	}
	if h == nil { // no put record (putRecords off)
		h = newHeader(p, fp, id, a.Num, off, lay, crcs)
	}
	db.st.bytesWritten.Add(lay.Length)
	if err := timed(&db.st.blobSyncs, &db.st.blobSyncNanos, a.F.SyncData); err != nil {
		return fmt.Errorf("store: sync blob file %s: %w", a.Path, err)
	}
	recs, err := db.commitPut(h, p.Model, a, lay.Length)
	if err != nil {
		return err
	}
	db.w.Committed(lay.Length)
	db.w.Seq++
	db.setRecords(recs...)
	spec := *p.Model
	db.models.LoadOrStore(fp, &spec)
	db.st.puts.Add(1)
	db.afterPut(h)
	return nil
}

// newHeader describes the extent just written.
func newHeader(p *Packet, fp format.Fingerprint, id format.PacketID, file uint32, off uint64, lay *bloblog.Layout, crcs []uint32) *format.PacketHeader {
	m := p.Model
	tokens := uint32(p.Tokens())
	h := &format.PacketHeader{
		Version: format.FormatMajor, Namespace: p.Namespace, ID: id, Model: fp, AdapterID: p.AdapterID,
		HeaderTokens: uint32(p.HeaderTokens), TrailerTokens: uint32(p.TrailerTokens), Tokens: tokens,
		TokenIDs: p.TokenIDs, BasePosition: int64(p.BasePosition),
		Layers: uint32(m.Layers), KVHeads: uint32(m.KVHeads), HeadDim: uint32(m.HeadDim), DType: m.DType,
		BlobFile: file, ExtentOffset: off, ExtentLength: lay.Length, CreatedUnixNs: time.Now().UnixNano(),
		Chunks: make([]format.ChunkDesc, lay.Chunks),
	}
	shape := []uint32{uint32(m.KVHeads), uint32(p.rows()), uint32(m.HeadDim)}
	if p.kept > 0 {
		h.KeptTokens = uint32(p.kept)
		i := h.PositionsChunk()
		n := uint64(len(p.positions))
		h.Chunks[i] = format.ChunkDesc{
			Layer: h.Layers, Kind: format.ChunkPositions, DType: format.DTypeU8,
			Shape: h.PositionsShape(), Codec: format.CodecRaw,
			BlobFile: file, Offset: off + lay.Rel(i), Length: n, RawLength: n, CRC32C: crcs[i],
		}
	}
	for i := range 2 * m.Layers {
		kind := format.ChunkK
		if i%2 == 1 {
			kind = format.ChunkV
		}
		h.Chunks[i] = format.ChunkDesc{
			Layer: uint32(i / 2), Kind: kind, DType: m.DType, Shape: shape, Codec: lay.Codec(i),
			BlobFile: file, Offset: off + lay.Rel(i), Length: lay.Size(i), RawLength: lay.Raw, CRC32C: crcs[i],
		}
	}
	return h
}

// commitPut commits, in one synced batch, the header, its index entry, the
// model spec if it is new, the blob file's record, records of files sealed
// since the last batch, the next record sequence and, for a new file, the
// next file number. It
// returns the records it wrote.
func (db *DB) commitPut(h *format.PacketHeader, m *format.ModelSpec, a *bloblog.Active, n uint64) ([]BlobFileInfo, error) {
	hv, err := format.EncodeHeader(h)
	if err != nil {
		return nil, fmt.Errorf("store: encode header: %w", err)
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	_ = b.Set(catalog.HeaderKey(h.Namespace, h.ID), hv, nil)
	_ = b.Set(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil, nil)
	if err := db.addModel(b, h.Model, m); err != nil {
		return nil, err
	}
	r, _ := db.record(a.Num)
	r.Size = a.End + n
	r.LiveBytes += n
	r.Extents++
	r.LiveExtents++
	recs := []BlobFileInfo{r}
	for _, num := range db.w.Sealed {
		s, ok := db.record(num)
		if ok {
			s.Sealed = true
			recs = append(recs, s)
		}
	}
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), encodeBlobRecord(&recs[i]), nil)
	}
	if a.Fresh {
		_ = b.Set(catalog.KeyNextBlob, encodeSequence(a.Num+1), nil)
	}
	_ = b.Set(catalog.KeyRecordSeq, format.EncodeRecordSeq(db.w.Seq+1), nil)
	if err := db.commit(b); err != nil {
		return nil, err
	}
	return recs, nil
}
