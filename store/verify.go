package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// VerifyOptions tune Verify. A nil *VerifyOptions means the defaults.
type VerifyOptions struct {
	// MaxFindings stops the walk once so many findings are reported
	// (0: no limit). The report says Truncated then.
	MaxFindings int
}

// VerifyReport is what Verify read and found.
type VerifyReport struct {
	Extents  int64 // extents read (packets and span memories)
	Chunks   int64 // chunks and span blocks whose CRC32C was checked
	Bytes    int64 // extent bytes read
	Findings []Finding
	// Skipped counts extents moved or deleted while Verify ran (a
	// concurrent Compact or Delete): they were not read.
	Skipped   int64
	Truncated bool // MaxFindings was reached
}

// OK reports whether nothing was found.
func (r *VerifyReport) OK() bool { return len(r.Findings) == 0 }

// Verify reads every catalogued extent (packets and span memories) and
// checks the CRC32C of each chunk and span block against its record, and
// each extent's trailer (magic, CRC, owner, offset, length and payload
// CRC). It reports each bad chunk with its file, offset, packet or
// context, layer and K|V, and goes on after a bad chunk, an undecodable
// record or an extent past its file's end: those are findings, not
// errors. The error is only for I/O failures, ErrClosed and ctx's error.
//
// Verify sees the catalog as of its start (a Pebble snapshot) and runs
// beside readers and writers; it ignores the verification cache, so every
// byte is read again. progress, if not nil, is called after each extent
// with the bytes read so far and the catalogued live bytes at the start.
func (db *DB) Verify(ctx context.Context, o *VerifyOptions, progress func(done, total int64)) (*VerifyReport, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	v := &verifier{db: db, rep: &VerifyReport{}, snap: db.cat.DB.NewSnapshot()}
	defer v.snap.Close()
	if o != nil {
		v.max = o.MaxFindings
	}
	var total int64
	for _, f := range db.BlobFiles() {
		total += int64(f.LiveBytes)
	}
	errStop := errors.New("stop")
	err := walkRefs(v.snap, func(r *extentRef) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := v.extent(r); err != nil {
			return err
		}
		if progress != nil {
			progress(v.rep.Bytes, total)
		}
		if v.max > 0 && len(v.rep.Findings) >= v.max {
			v.rep.Truncated = true
			return errStop
		}
		return nil
	}, func(b badRecord) { v.add(recordFinding(b)) })
	if err != nil && !errors.Is(err, errStop) {
		return v.rep, err
	}
	return v.rep, nil
}

// verifier holds one Verify run's state.
type verifier struct {
	db   *DB
	rep  *VerifyReport
	snap *pebble.Snapshot
	max  int
	buf  []byte
}

func (v *verifier) add(f Finding) { v.rep.Findings = append(v.rep.Findings, f) }

// extent verifies one catalogued extent.
func (v *verifier) extent(r *extentRef) error {
	f := v.db.file(r.File)
	if f == nil {
		if _, found, err := snapGet(v.snap, catalog.BlobFileKey(r.File)); err != nil {
			return err
		} else if found {
			v.rep.Skipped++ // retired by a compaction since the snapshot
			return nil
		}
		v.add(refFinding(FindingDangling, r, blobPath(v.db, r.File), "blob file is not catalogued"))
		return nil
	}
	defer f.Release()
	b, err := v.read(f, r)
	if errors.Is(err, ErrCorruption) {
		v.add(refFinding(FindingDangling, r, f.Path(), err.Error()))
		return nil
	}
	if err != nil {
		return err
	}
	v.rep.Extents++
	v.rep.Bytes += int64(r.Length)
	rs, err := v.regions(r)
	if err != nil {
		return err
	}
	got, payloadCRC, payloadEnd := crcRegions(b, rs)
	bad := false
	for i := range rs {
		v.rep.Chunks++
		if got[i] != rs[i].crc {
			bad = true
			fd := refFinding(FindingChunkCRC, r, f.Path(), fmt.Sprintf("%s: crc32c %08x, computed %08x", rs[i].what, rs[i].crc, got[i]))
			fd.Offset, fd.Length, fd.Layer, fd.Chunk = r.Offset+rs[i].off, rs[i].n, rs[i].layer, rs[i].kind
			v.add(fd)
		}
	}
	if bad {
		payloadEnd = noPayloadCheck // the bad chunk is the finding
	}
	if msg := trailerProblem(b, r, payloadCRC, payloadEnd); msg != "" {
		v.add(refFinding(FindingTrailer, r, f.Path(), msg))
	}
	return nil
}

// read returns the extent's bytes: a slice of the mapping, or v.buf.
func (v *verifier) read(f *bloblog.File, r *extentRef) ([]byte, error) {
	b, err := f.Span(r.Offset, r.Length)
	if err != nil || b != nil {
		return b, err
	}
	if uint64(cap(v.buf)) < r.Length {
		v.buf = make([]byte, r.Length)
	}
	b = v.buf[:r.Length]
	return b, f.ReadAt(b, r.Offset)
}

// regions lists the extent's checksummed blocks; for a span memory it
// reads the head records from the snapshot (a missing or bad one is a
// finding).
func (v *verifier) regions(r *extentRef) ([]region, error) {
	if r.Header != nil {
		return packetRegions(r.Header), nil
	}
	rs := spanResidentRegions(r.Span)
	m := r.Span
	for l := range m.Layers {
		for h := range m.KVHeads {
			val, found, err := snapGet(v.snap, catalog.SpanHeadKey(r.Namespace, r.Context, l, h))
			if err != nil {
				return nil, err
			}
			var hm *HeadMeta
			if found {
				hm, err = decodeHeadMeta(val, m)
			}
			if !found || err != nil {
				fd := refFinding(FindingRecord, r, "", fmt.Sprintf("layer %d head %d record: missing or bad: %v", l, h, err))
				fd.Layer = l
				v.add(fd)
				continue
			}
			rs = append(rs, headRegions(hm)...)
		}
	}
	return rs, nil
}

// snapGet reads key from s: its value (copied) and whether it exists.
func snapGet(s pebble.Reader, key []byte) ([]byte, bool, error) {
	val, closer, err := s.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: catalog get %x: %w", key, err)
	}
	defer closer.Close()
	return append([]byte(nil), val...), true, nil
}

// blobPath is blob file num's path.
func blobPath(db *DB, num uint32) string { return db.fs.PathJoin(db.w.Dir, bloblog.FileName(num)) }

// region is one checksummed block of an extent, relative to its start.
type region struct {
	off, n uint64
	crc    uint32
	layer  int
	kind   format.ChunkKind
	what   string
}

// packetRegions lists a packet's chunks.
func packetRegions(h *format.PacketHeader) []region {
	rs := make([]region, len(h.Chunks))
	for i, c := range h.Chunks {
		rs[i] = region{off: c.Offset - h.ExtentOffset, n: c.Length, crc: c.CRC32C, layer: int(c.Layer), kind: c.Kind,
			what: fmt.Sprintf("chunk %d (layer %d %v)", i, c.Layer, c.Kind)}
	}
	return rs
}

// spanResidentRegions lists a span memory's resident blocks.
func spanResidentRegions(m *SpanMeta) []region {
	var rs []region
	for l, b := range m.Blocks {
		if b.Length == 0 {
			continue
		}
		rs = append(rs,
			region{off: b.KOffset, n: b.Length, crc: b.KCRC, layer: l, kind: format.ChunkK, what: fmt.Sprintf("layer %d resident K", l)},
			region{off: b.VOffset, n: b.Length, crc: b.VCRC, layer: l, kind: format.ChunkV, what: fmt.Sprintf("layer %d resident V", l)})
	}
	return rs
}

// headRegions lists one head's factor blocks.
func headRegions(h *HeadMeta) []region {
	var rs []region
	for s := range h.K {
		for _, x := range []struct {
			b    FactorBlock
			kind format.ChunkKind
		}{{h.K[s], format.ChunkK}, {h.V[s], format.ChunkV}} {
			if x.b.Length == 0 {
				continue
			}
			rs = append(rs, region{off: x.b.Offset, n: uint64(x.b.Length), crc: x.b.CRC, layer: h.Layer, kind: x.kind,
				what: fmt.Sprintf("layer %d head %d span %d %v factors", h.Layer, h.Head, s, x.kind)})
		}
	}
	return rs
}

// crcRegions computes the CRC32C of each region of extent b (regions lie
// inside b, as decoded records guarantee) and, in the same pass, the CRC
// of b[:end], end being the last region's end: the payload CRC the
// trailer holds when the regions end the payload. end is 0 when regions
// overlap (then the trailer check computes the payload CRC itself).
func crcRegions(b []byte, rs []region) (got []uint32, payload uint32, end uint64) {
	got = make([]uint32, len(rs))
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmpU64(rs[x].off, rs[y].off) })
	var pos uint64
	tiled := true
	for _, i := range order {
		r := rs[i]
		got[i] = bloblog.CRC(b[r.off : r.off+r.n])
		if r.off < pos {
			tiled = false
			continue
		}
		payload = bloblog.CRCCombine(payload, bloblog.CRC(b[pos:r.off]), r.off-pos)
		payload = bloblog.CRCCombine(payload, got[i], r.n)
		pos = r.off + r.n
	}
	if !tiled {
		return got, 0, 0
	}
	return got, payload, pos
}

// regionsEnd is the end of the last region: the payload length.
func regionsEnd(rs []region) uint64 {
	var end uint64
	for _, r := range rs {
		end = max(end, r.off+r.n)
	}
	return end
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// noPayloadCheck tells trailerProblem not to check the payload CRC.
const noPayloadCheck = ^uint64(0)

// trailerProblem checks the trailer ending extent b of r; payloadCRC is
// the CRC of b[:end] that crcRegions derived. It returns "" if it is good.
func trailerProblem(b []byte, r *extentRef, payloadCRC uint32, end uint64) string {
	if uint64(len(b)) < format.TrailerSize {
		return fmt.Sprintf("extent of %d bytes cannot hold a trailer", len(b))
	}
	t, err := format.DecodeTrailer(b[len(b)-format.TrailerSize:])
	switch n, ok := format.ExtentLength(t.PayloadLen); {
	case err != nil:
		return err.Error()
	case t.Packet != format.PacketID(r.ID):
		return fmt.Sprintf("trailer names %s", t.Packet.Short())
	case t.Offset != r.Offset:
		return fmt.Sprintf("trailer says the extent starts at %d", t.Offset)
	case !ok || n != r.Length:
		return fmt.Sprintf("trailer's payload of %d bytes does not make a %d-byte extent", t.PayloadLen, r.Length)
	}
	if r.Header != nil && t.PayloadLen != regionsEnd(packetRegions(r.Header)) {
		return fmt.Sprintf("trailer's payload of %d bytes does not end at the last chunk", t.PayloadLen)
	}
	switch {
	case end == noPayloadCheck:
		return ""
	case end != t.PayloadLen:
		payloadCRC = bloblog.CRC(b[:t.PayloadLen])
	}
	if payloadCRC != t.PayloadCRC {
		return fmt.Sprintf("payload crc32c %08x, computed %08x", t.PayloadCRC, payloadCRC)
	}
	return ""
}
