package maint

import (
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCRCRegionsTiled(t *testing.T) {
	b := randBytes(10000, 1)
	// Listed out of order, with gaps between them: the payload CRC covers
	// the gaps too.
	rs := []Region{{Off: 6000, N: 1000}, {Off: 0, N: 1000}, {Off: 1500, N: 3000}}
	got, payload, end := CRCRegions(b, rs)
	for i, r := range rs {
		if want := bloblog.CRC(b[r.Off : r.Off+r.N]); got[i] != want {
			t.Errorf("region %d: crc %08x, want %08x", i, got[i], want)
		}
	}
	if end != 7000 {
		t.Fatalf("end %d, want 7000", end)
	}
	if want := bloblog.CRC(b[:end]); payload != want {
		t.Fatalf("payload crc %08x, want %08x", payload, want)
	}
}

func TestCRCRegionsOverlap(t *testing.T) {
	b := randBytes(4096, 2)
	rs := []Region{{Off: 0, N: 2000}, {Off: 1000, N: 2000}}
	got, payload, end := CRCRegions(b, rs)
	if payload != 0 || end != 0 {
		t.Fatalf("overlapping regions: payload %08x end %d, want 0 0", payload, end)
	}
	if want := bloblog.CRC(b[1000:3000]); got[1] != want {
		t.Fatalf("region 1: crc %08x, want %08x", got[1], want)
	}
}

// extent builds an extent of a payload of n bytes at off, owned by id.
func extent(n int, off uint64, id format.PacketID) ([]byte, *ExtentRef) {
	length, _ := format.ExtentLength(uint64(n))
	b := make([]byte, length)
	copy(b, randBytes(n, 3))
	tr := format.Trailer{Packet: id, Offset: off, PayloadLen: uint64(n), PayloadCRC: bloblog.CRC(b[:n])}
	copy(b[len(b)-format.TrailerSize:], tr.Encode())
	return b, &ExtentRef{File: 1, Offset: off, Length: length, ID: id}
}

func TestTrailerProblem(t *testing.T) {
	id := format.PacketID{7}
	b, r := extent(5000, 4096, id)
	rs := []Region{{Off: 0, N: 2000, What: "chunk 0"}, {Off: 2000, N: 3000, What: "chunk 1"}}
	for i := range rs {
		rs[i].CRC = bloblog.CRC(b[rs[i].Off : rs[i].Off+rs[i].N])
	}
	_, crc, end := CRCRegions(b, rs)
	if msg := TrailerProblem(b, r, crc, end); msg != "" {
		t.Fatalf("good extent: %s", msg)
	}
	if msg := CheckRegions(b, r, rs); msg != "" {
		t.Fatalf("good extent, CheckRegions: %s", msg)
	}
	other := *r
	other.ID = [32]byte{8}
	moved := *r
	moved.Offset += format.Alignment
	for _, c := range []struct {
		what string
		r    *ExtentRef
		want string
	}{
		{"other owner", &other, "trailer names"},
		{"other offset", &moved, "starts at 4096"},
	} {
		if msg := TrailerProblem(b, c.r, crc, end); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want it to say %q", c.what, msg, c.want)
		}
	}
	b[100] ^= 1
	if msg := CheckRegions(b, r, rs); msg != "chunk 0 fails its crc32c" {
		t.Fatalf("flipped payload byte: %q", msg)
	}
	if msg := TrailerProblem(b, r, 0, NoPayloadCheck); msg != "" {
		t.Fatalf("NoPayloadCheck still checked the payload: %s", msg)
	}
	if msg := TrailerProblem(b, r, 0, 0); !strings.Contains(msg, "payload crc32c") {
		t.Fatalf("flipped payload byte, payload recomputed: %q", msg)
	}
	if msg := TrailerProblem(b[:10], r, 0, 0); !strings.Contains(msg, "cannot hold a trailer") {
		t.Fatalf("short extent: %q", msg)
	}
}

func TestReadExtentCopies(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	body, r := extent(3000, format.BlobHeaderSize, format.PacketID{1})
	f, err := fs.Create("blobs/"+bloblog.FileName(1), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(format.EncodeBlobHeader(1), body...)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	bf := bloblog.NewFile(fs, "blobs", 1, false, 0, slog.New(slog.DiscardHandler))
	defer bf.Release()
	var buf []byte
	got, err := ReadExtent(bf, r, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(body) {
		t.Fatal("ReadExtent returned other bytes than the extent's")
	}
	if &buf[0] != &got[0] {
		t.Fatal("ReadExtent did not read into the caller's buffer on a file that is not mapped")
	}
}

func TestParseBlobFileName(t *testing.T) {
	for _, c := range []struct {
		name string
		num  uint32
		ok   bool
	}{
		{"000001.blob", 1, true},
		{"1234567.blob", 1234567, true},
		{"1.blob", 0, false},
		{"000001.blob.tmp", 0, false},
		{"LOCK", 0, false},
	} {
		num, ok := ParseBlobFileName(c.name)
		if num != c.num || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.name, num, ok, c.num, c.ok)
		}
	}
}
