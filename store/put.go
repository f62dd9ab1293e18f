package store

import (
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
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
func (db *DB) Put(p *Packet) (format.PacketID, error) {
	var id format.PacketID
	if err := db.enter(); err != nil {
		return id, err
	}
	defer db.leave()
	if db.opts.ReadOnly {
		return id, fmt.Errorf("%w: put", ErrReadOnly)
	}
	chunkLen, err := p.check()
	if err != nil {
		return id, err
	}
	fp := p.Model.Fingerprint()
	id = format.ComputePacketID(p.Namespace, fp, p.AdapterID, p.TokenIDs)
	if p.AdapterID != "" {
		// A packet's adapter rows are only as good as the adapter they
		// came from: it must be stored for this model (package adapter).
		if _, err := db.StatArtifact(fp, AdapterArtifact(p.AdapterID)); err != nil {
			return id, fmt.Errorf("put packet %s: its adapter: %w", id.Short(), err)
		}
	}

	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if db.failed != nil {
		return id, db.failed
	}
	if ok, err := db.cat.has(headerKey(p.Namespace, id)); err != nil || ok {
		if ok {
			db.st.putsDeduped.Add(1)
		}
		return id, err
	}
	q, err := p.compacted().normalized()
	if err != nil {
		return id, err
	}
	// Encoded first, so that room is made for the extent as it will be
	// stored (compressed chunks, a pruned packet's positions at their own
	// size), and a packet the codec refuses evicts nothing.
	q, lay, err := encodeChunks(q, chunkLen)
	if err != nil {
		return id, err
	}
	if err := db.makeRoom(lay.length); err != nil {
		return id, fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	if err := db.put(q, &lay, fp, id); err != nil {
		return id, fmt.Errorf("put packet %s: %w", id.Short(), err)
	}
	return id, nil
}

// AdapterArtifact is the artifact name under which a model's KV Packet
// adapter id is stored; Put refuses a packet naming an adapter id that has
// no such artifact for its model (ErrNotFound, or ErrModelMismatch when
// only another model has it).
func AdapterArtifact(id string) string { return "adapter/" + id }

// put writes, syncs and catalogues a packet known to be new, encoded and
// laid out as lay.
func (db *DB) put(p *Packet, lay *extentLayout, fp format.Fingerprint, id format.PacketID) error {
	a, err := db.w.prepare(lay.length)
	if err != nil {
		return err
	}
	if a.fresh {
		db.addFile(BlobFileInfo{Num: a.num, Size: a.end})
	}
	if err := db.append(a, lay, p, fp, id); err != nil {
		if a.fresh {
			db.dropFile(a.num)
		}
		db.w.abandon()
		return err
	}
	return nil
}

// append writes the extent at the end of a, syncs it and commits the batch.
func (db *DB) append(a *activeFile, lay *extentLayout, p *Packet, fp format.Fingerprint, id format.PacketID) error {
	off := a.end
	crcs, err := writeExtent(a.f, db.rawFd(a.f), a.path, off, lay, p, id)
	if err != nil {
		return err
	}
	db.st.bytesWritten.Add(lay.length)
	if err := timed(&db.st.blobSyncs, &db.st.blobSyncNanos, a.f.SyncData); err != nil {
		return fmt.Errorf("store: sync blob file %s: %w", a.path, err)
	}
	h := newHeader(p, fp, id, a.num, off, lay, crcs)
	recs, err := db.commitPut(h, p.Model, a, lay.length)
	if err != nil {
		return err
	}
	db.w.committed(lay.length)
	db.setRecords(recs...)
	spec := *p.Model
	db.models.LoadOrStore(fp, &spec)
	db.st.puts.Add(1)
	db.afterPut(h)
	return nil
}

// newHeader describes the extent just written.
func newHeader(p *Packet, fp format.Fingerprint, id format.PacketID, file uint32, off uint64, lay *extentLayout, crcs []uint32) *format.PacketHeader {
	m := p.Model
	tokens := uint32(p.Tokens())
	h := &format.PacketHeader{
		Version: format.FormatMajor, Namespace: p.Namespace, ID: id, Model: fp, AdapterID: p.AdapterID,
		HeaderTokens: uint32(p.HeaderTokens), TrailerTokens: uint32(p.TrailerTokens), Tokens: tokens,
		TokenIDs: p.TokenIDs, BasePosition: int64(p.BasePosition),
		Layers: uint32(m.Layers), KVHeads: uint32(m.KVHeads), HeadDim: uint32(m.HeadDim), DType: m.DType,
		BlobFile: file, ExtentOffset: off, ExtentLength: lay.length, CreatedUnixNs: time.Now().UnixNano(),
		Chunks: make([]format.ChunkDesc, lay.chunks),
	}
	shape := []uint32{uint32(m.KVHeads), uint32(p.rows()), uint32(m.HeadDim)}
	if p.kept > 0 {
		h.KeptTokens = uint32(p.kept)
		i := h.PositionsChunk()
		n := uint64(len(p.positions))
		h.Chunks[i] = format.ChunkDesc{
			Layer: h.Layers, Kind: format.ChunkPositions, DType: format.DTypeU8,
			Shape: h.PositionsShape(), Codec: format.CodecRaw,
			BlobFile: file, Offset: off + lay.rel(i), Length: n, RawLength: n, CRC32C: crcs[i],
		}
	}
	for i := range 2 * m.Layers {
		kind := format.ChunkK
		if i%2 == 1 {
			kind = format.ChunkV
		}
		h.Chunks[i] = format.ChunkDesc{
			Layer: uint32(i / 2), Kind: kind, DType: m.DType, Shape: shape, Codec: lay.codec(i),
			BlobFile: file, Offset: off + lay.rel(i), Length: lay.size(i), RawLength: lay.raw, CRC32C: crcs[i],
		}
	}
	return h
}

// commitPut commits, in one synced batch, the header, its index entry, the
// model spec if it is new, the blob file's record, records of files sealed
// since the last batch and, for a new file, the next file number. It
// returns the records it wrote.
func (db *DB) commitPut(h *format.PacketHeader, m *format.ModelSpec, a *activeFile, n uint64) ([]BlobFileInfo, error) {
	hv, err := format.EncodeHeader(h)
	if err != nil {
		return nil, fmt.Errorf("store: encode header: %w", err)
	}
	b := db.cat.db.NewBatch()
	defer b.Close()
	_ = b.Set(headerKey(h.Namespace, h.ID), hv, nil)
	_ = b.Set(indexKey(h.Namespace, h.Model, h.ID), nil, nil)
	if err := db.addModel(b, h.Model, m); err != nil {
		return nil, err
	}
	r, _ := db.record(a.num)
	r.Size = a.end + n
	r.LiveBytes += n
	r.Extents++
	r.LiveExtents++
	recs := []BlobFileInfo{r}
	for _, num := range db.w.sealed {
		s, ok := db.record(num)
		if ok {
			s.Sealed = true
			recs = append(recs, s)
		}
	}
	for i := range recs {
		_ = b.Set(blobFileKey(recs[i].Num), encodeBlobRecord(&recs[i]), nil)
	}
	if a.fresh {
		_ = b.Set(keyNextBlob, encodeSequence(a.num+1), nil)
	}
	if err := db.commit(b); err != nil {
		return nil, err
	}
	return recs, nil
}
