package maint

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Region is one checksummed block of an extent, relative to its start.
type Region struct {
	Off, N uint64
	CRC    uint32
	Layer  int
	Kind   format.ChunkKind
	What   string // names the block in findings
}

// PacketRegions lists a packet's chunks.
func PacketRegions(h *format.PacketHeader) []Region {
	rs := make([]Region, len(h.Chunks))
	for i, c := range h.Chunks {
		rs[i] = Region{Off: c.Offset - h.ExtentOffset, N: c.Length, CRC: c.CRC32C, Layer: int(c.Layer), Kind: c.Kind,
			What: fmt.Sprintf("chunk %d (layer %d %v)", i, c.Layer, c.Kind)}
	}
	return rs
}

// SpanResidentRegions lists a span memory's resident blocks.
func SpanResidentRegions(m *format.SpanMeta) []Region {
	var rs []Region
	for l, b := range m.Blocks {
		if b.Length == 0 {
			continue
		}
		rs = append(rs,
			Region{Off: b.KOffset, N: b.Length, CRC: b.KCRC, Layer: l, Kind: format.ChunkK, What: fmt.Sprintf("layer %d resident K", l)},
			Region{Off: b.VOffset, N: b.Length, CRC: b.VCRC, Layer: l, Kind: format.ChunkV, What: fmt.Sprintf("layer %d resident V", l)})
	}
	return rs
}

// HeadRegions lists one head's factor blocks.
func HeadRegions(h *format.HeadMeta) []Region {
	var rs []Region
	for s := range h.K {
		for _, x := range []struct {
			b    format.FactorBlock
			kind format.ChunkKind
		}{{h.K[s], format.ChunkK}, {h.V[s], format.ChunkV}} {
			if x.b.Length == 0 {
				continue
			}
			rs = append(rs, Region{Off: x.b.Offset, N: uint64(x.b.Length), CRC: x.b.CRC, Layer: h.Layer, Kind: x.kind,
				What: fmt.Sprintf("layer %d head %d span %d %v factors", h.Layer, h.Head, s, x.kind)})
		}
	}
	return rs
}

// CRCRegions computes the CRC32C of each region of extent b (regions lie
// inside b, as decoded records guarantee) and, in the same pass, the CRC
// of b[:end], end being the last region's end: the payload CRC the
// trailer holds when the regions end the payload. end is 0 when regions
// overlap (then the trailer check computes the payload CRC itself).
func CRCRegions(b []byte, rs []Region) (got []uint32, payload uint32, end uint64) {
	got = make([]uint32, len(rs))
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(rs[x].Off, rs[y].Off) })
	var pos uint64
	tiled := true
	for _, i := range order {
		r := rs[i]
		got[i] = bloblog.CRC(b[r.Off : r.Off+r.N])
		if r.Off < pos {
			tiled = false
			continue
		}
		payload = bloblog.CRCCombine(payload, bloblog.CRC(b[pos:r.Off]), r.Off-pos)
		payload = bloblog.CRCCombine(payload, got[i], r.N)
		pos = r.Off + r.N
	}
	if !tiled {
		return got, 0, 0
	}
	return got, payload, pos
}

// regionsEnd is the end of the last region: the payload length.
func regionsEnd(rs []Region) uint64 {
	var end uint64
	for _, r := range rs {
		end = max(end, r.Off+r.N)
	}
	return end
}

// NoPayloadCheck tells TrailerProblem not to check the payload CRC.
const NoPayloadCheck = ^uint64(0)

// TrailerProblem checks the trailer ending extent b of r; payloadCRC is
// the CRC of b[:end] that CRCRegions derived. It returns "" if it is good.
func TrailerProblem(b []byte, r *ExtentRef, payloadCRC uint32, end uint64) string {
	if uint64(len(b)) < format.TrailerSize {
		return fmt.Sprintf("extent of %d bytes cannot hold a trailer", len(b))
	}
	t, msg := trailerFields(b[len(b)-format.TrailerSize:], r)
	if msg != "" {
		return msg
	}
	if r.Header != nil && t.PayloadLen != regionsEnd(PacketRegions(r.Header)) {
		return fmt.Sprintf("trailer's payload of %d bytes does not end at the last chunk", t.PayloadLen)
	}
	switch {
	case end == NoPayloadCheck:
		return ""
	case end != t.PayloadLen:
		payloadCRC = bloblog.CRC(b[:t.PayloadLen])
	}
	if payloadCRC != t.PayloadCRC {
		return fmt.Sprintf("payload crc32c %08x, computed %08x", t.PayloadCRC, payloadCRC)
	}
	return ""
}

// trailerFields decodes trailer b of extent r and checks its own fields
// against r: the owner, the offset and the extent length its payload
// length makes (not the payload CRC, which needs the payload). It returns
// the trailer and "" when they are good, else what is wrong.
func trailerFields(b []byte, r *ExtentRef) (format.Trailer, string) {
	t, err := format.DecodeTrailer(b)
	switch n, ok := format.ExtentLength(t.PayloadLen); {
	case err != nil:
		return t, err.Error()
	case t.Packet != format.PacketID(r.ID):
		return t, fmt.Sprintf("trailer names %s", t.Packet.Short())
	case t.Offset != r.Offset:
		return t, fmt.Sprintf("trailer says the extent starts at %d", t.Offset)
	case !ok || n != r.Length:
		return t, fmt.Sprintf("trailer's payload of %d bytes does not make a %d-byte extent", t.PayloadLen, r.Length)
	}
	return t, ""
}

// SpanRegions lists every block of a span memory: resident, then factors.
func SpanRegions(m *format.SpanMeta, heads []*format.HeadMeta) []Region {
	rs := SpanResidentRegions(m)
	for _, h := range heads {
		rs = append(rs, HeadRegions(h)...)
	}
	return rs
}

// CheckRegions verifies every region of extent b and its trailer; it
// returns what failed, "" when nothing did.
func CheckRegions(b []byte, r *ExtentRef, rs []Region) string {
	got, crc, end := CRCRegions(b, rs)
	for i := range rs {
		if got[i] != rs[i].CRC {
			return fmt.Sprintf("%s fails its crc32c", rs[i].What)
		}
	}
	return TrailerProblem(b, r, crc, end)
}

// ReadExtent returns r's bytes in f: a slice of the mapping when f is
// mapped, else read into *buf (grown as needed and kept for the next
// call).
func ReadExtent(f *bloblog.File, r *ExtentRef, buf *[]byte) ([]byte, error) {
	b, err := f.Span(r.Offset, r.Length)
	if err != nil || b != nil {
		return b, err
	}
	if uint64(cap(*buf)) < r.Length {
		*buf = make([]byte, r.Length)
	}
	b = (*buf)[:r.Length]
	return b, f.ReadAt(b, r.Offset)
}
