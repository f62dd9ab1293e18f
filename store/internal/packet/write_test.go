package packet

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// TestWrite: the extent Write writes at the end of a blob file holds every
// chunk where its header says, with the CRC32C of its bytes; with a put
// record, the record in the extent's prefix decodes to that header; a
// pruned packet's positions chunk is described as such.
func TestWrite(t *testing.T) {
	spec := testSpec(2, 2, 8)
	keep, err := prune.Random(2, 2, 7, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		record bool
		keep   *prune.Set
	}{{"record", true, nil}, {"no record", false, nil}, {"pruned", true, keep}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			f, err := fs.Create("/b", vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			a := &bloblog.Active{Num: 4, Path: "/b", F: f, End: 3 * format.BlobHeaderSize}
			d := randDesc(spec, 7, 6)
			d.Keep, d.BasePosition = tc.keep, 2
			n, err := d.Check()
			if err != nil {
				t.Fatal(err)
			}
			id := idOf(d)
			e, err := Encode(d, n, spec.Fingerprint(), id, 12, tc.record)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Write(a, vfs.InvalidFd, &e, 12)
			if err != nil {
				t.Fatal(err)
			}
			if h.BlobFile != 4 || h.ExtentOffset != a.End || h.ExtentLength != e.Layout.Length || h.ID != id ||
				h.Tokens != 7 || h.BasePosition != 2 || len(h.Chunks) != e.Layout.Chunks || h.CreatedUnixNs == 0 {
				t.Fatalf("header %+v", h)
			}
			if err := h.Validate(); err != nil {
				t.Fatalf("header does not validate: %v", err)
			}
			for i, c := range h.Chunks {
				b := make([]byte, c.Length)
				if _, err := f.ReadAt(b, int64(c.Offset)); err != nil {
					t.Fatal(err)
				}
				if c.BlobFile != 4 || !bytes.Equal(b, e.Desc.Chunk(i)) || c.CRC32C != bloblog.CRC(b) {
					t.Fatalf("chunk %d (%+v) does not hold its bytes", i, c)
				}
			}
			if tc.keep != nil && (h.KeptTokens != 3 || h.Chunks[4].Kind != format.ChunkPositions) {
				t.Fatalf("pruned header: kept %d, chunk 4 %+v", h.KeptTokens, h.Chunks[4])
			}
			if !tc.record {
				if h.Chunks[0].Offset != a.End {
					t.Fatalf("chunk 0 at %d without a record, want %d", h.Chunks[0].Offset, a.End)
				}
				return
			}
			pre := make([]byte, e.Layout.Prefix)
			if _, err := f.ReadAt(pre, int64(a.End)); err != nil {
				t.Fatal(err)
			}
			// The record's frame says its body's length; zeros follow it.
			end := format.FrameSize + int(binary.LittleEndian.Uint32(pre[8:]))
			r, err := format.DecodePutRecord(pre[:end])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pre[end:], make([]byte, len(pre)-end)) {
				t.Fatal("the prefix is not zero past the record")
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Seq != 12 || !reflect.DeepEqual(r.Header, h) || r.Spec.Fingerprint() != spec.Fingerprint() {
				t.Fatalf("put record %d %+v, want the header %+v", r.Seq, r.Header, h)
			}
		})
	}
}
