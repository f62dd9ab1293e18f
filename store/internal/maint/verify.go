package maint

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// VerifyOptions tune Verify. A nil *VerifyOptions means the defaults.
type VerifyOptions struct {
	// MaxFindings stops the walk once so many findings are reported
	// (0: no limit): the report holds at most that many, the first found,
	// and says Truncated.
	MaxFindings int
	// Progress, if not nil, is called after each extent with the bytes
	// read so far and the catalogued live bytes at the start.
	Progress func(done, total int64)
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

// Verify reads every extent catalogued in snap (packets and span
// memories) from s's blob files and checks each chunk's and span block's
// CRC32C and each trailer; store.DB.Verify documents what it finds.
// total is the catalogued live bytes at the start, for progress.
func Verify(ctx context.Context, s *Store, snap pebble.Reader, o *VerifyOptions, total int64, progress func(done, total int64)) (*VerifyReport, error) {
	v := &verifier{s: s, rep: &VerifyReport{}, snap: snap}
	if o != nil {
		v.max = o.MaxFindings
	}
	errStop := errors.New("stop")
	err := WalkRefs(snap, func(r *ExtentRef) error {
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
			return errStop
		}
		return nil
	}, func(b BadRecord) { v.add(RecordFinding(b)) })
	if v.max > 0 && len(v.rep.Findings) >= v.max {
		// One extent can hold several findings: keep the first max.
		v.rep.Findings, v.rep.Truncated = v.rep.Findings[:v.max], true
	}
	if err != nil && !errors.Is(err, errStop) {
		return v.rep, err
	}
	return v.rep, nil
}

// verifier holds one Verify run's state.
type verifier struct {
	s    *Store
	rep  *VerifyReport
	snap pebble.Reader
	max  int
	buf  []byte
}

func (v *verifier) add(f Finding) { v.rep.Findings = append(v.rep.Findings, f) }

// extent verifies one catalogued extent.
func (v *verifier) extent(r *ExtentRef) error {
	f := v.s.Files.File(r.File)
	if f == nil {
		if _, found, err := SnapGet(v.snap, catalog.BlobFileKey(r.File)); err != nil {
			return err
		} else if found {
			v.rep.Skipped++ // retired by a compaction since the snapshot
			return nil
		}
		v.add(RefFinding(FindingDangling, r, v.s.Path(r.File), "blob file is not catalogued"))
		return nil
	}
	defer f.Release()
	b, err := ReadExtent(f, r, &v.buf)
	if errors.Is(err, format.ErrCorruption) {
		v.add(RefFinding(FindingDangling, r, f.Path(), err.Error()))
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
	var got []uint32
	var payloadCRC uint32
	var payloadEnd uint64
	err = f.Guard(func() error {
		got, payloadCRC, payloadEnd = CRCRegions(b, rs)
		return nil
	})
	if errors.Is(err, format.ErrCorruption) {
		v.add(RefFinding(FindingDangling, r, f.Path(), err.Error()))
		return nil
	}
	if err != nil {
		return err
	}
	bad := false
	for i := range rs {
		v.rep.Chunks++
		if got[i] != rs[i].CRC {
			bad = true
			fd := RefFinding(FindingChunkCRC, r, f.Path(), fmt.Sprintf("%s: crc32c %08x, computed %08x", rs[i].What, rs[i].CRC, got[i]))
			fd.Offset, fd.Length, fd.Layer, fd.Chunk = r.Offset+rs[i].Off, rs[i].N, rs[i].Layer, rs[i].Kind
			v.add(fd)
		}
	}
	if bad {
		payloadEnd = NoPayloadCheck // the bad chunk is the finding
	}
	var msg string
	if err := f.Guard(func() error { msg = TrailerProblem(b, r, payloadCRC, payloadEnd); return nil }); err != nil {
		msg = err.Error()
	}
	if msg != "" {
		v.add(RefFinding(FindingTrailer, r, f.Path(), msg))
	}
	return nil
}

// regions lists the extent's checksummed blocks; for a span memory it
// reads the head records from the snapshot (a missing or bad one is a
// finding).
func (v *verifier) regions(r *ExtentRef) ([]Region, error) {
	if r.Header != nil {
		return PacketRegions(r.Header), nil
	}
	rs := SpanResidentRegions(r.Span)
	m := r.Span
	for l := range m.Layers {
		for h := range m.KVHeads {
			val, found, err := SnapGet(v.snap, catalog.SpanHeadKey(r.Namespace, r.Context, l, h))
			if err != nil {
				return nil, err
			}
			var hm *format.HeadMeta
			if found {
				hm, err = format.DecodeHeadMeta(val, m)
			}
			if !found || err != nil {
				fd := RefFinding(FindingRecord, r, "", fmt.Sprintf("layer %d head %d record: missing or bad: %v", l, h, err))
				fd.Layer = l
				v.add(fd)
				continue
			}
			rs = append(rs, HeadRegions(hm)...)
		}
	}
	return rs, nil
}

// SnapGet reads key from s: its value (copied) and whether it exists.
func SnapGet(s pebble.Reader, key []byte) ([]byte, bool, error) {
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
