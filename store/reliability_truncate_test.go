package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// truncCounts tallies a truncation campaign.
type truncCounts struct {
	truncations int
	exact       int // packets read back exact (wholly below the cut, or in another file)
	corrupt     int // packets cut off: ErrCorruption on read
	openErrs    int // Opens refused with ErrCorruption
	panics      int
}

// truncateMem replaces the file at path of fs with its first n bytes.
func truncateMem(t *testing.T, fs *vfs.MemFS, path string, n int) {
	data, err := fs.UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	prefix := append([]byte(nil), data[:n]...)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(prefix); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// truncationPoints are 0, the extent boundaries (and their neighbours) and
// a stride of the last 64 KiB of a file of size n.
func truncationPoints(g *golden, num uint32, n, stride int) []int {
	pts := []int{0}
	for _, h := range g.headers {
		if h.BlobFile == num {
			end := int(h.ExtentOffset + h.ExtentLength)
			pts = append(pts, end-1, end, end+1, int(h.ExtentOffset)+1)
		}
	}
	for off := max(n-64<<10, 1); off < n; off += stride {
		pts = append(pts, off)
	}
	var out []int
	for _, p := range pts {
		if p >= 0 && p < n {
			out = append(out, p)
		}
	}
	return out
}

// TestReliabilityTruncation cuts each blob file of the golden store at 0,
// at its extents' boundaries and at a stride of its last 64 KiB, and
// reopens: every packet wholly below the cut (and every packet of other
// files) reads back exact, every packet cut off is ErrCorruption, nothing
// panics, and the store takes a new packet afterwards.
func TestReliabilityTruncation(t *testing.T) {
	mem := vfs.NewCrashableMem()
	g := buildGolden(t, mem, "/db")
	stride := pick(1021, 1)
	var c truncCounts
	db := g.open(t, nil)
	files := db.BlobFiles()
	db.Close()
	for _, f := range files {
		size := len(mustData(t, mem, f.Path))
		for _, n := range truncationPoints(g, f.Num, size, stride) {
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			truncateMem(t, fs, f.Path, n)
			c.truncations++
			checkTruncated(t, g, fs, f.Num, uint64(n), &c)
		}
	}
	t.Logf("truncation (stride %d over the last 64 KiB of %d blob files, plus 0 and extent boundaries): %d truncations, %d packet reads exact, %d ErrCorruption, %d Opens refused, %d panics",
		stride, len(files), c.truncations, c.exact, c.corrupt, c.openErrs, c.panics)
}

func mustData(t *testing.T, fs *vfs.MemFS, path string) []byte {
	b, err := fs.UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTruncated opens fs, whose blob file num was cut to n bytes.
func checkTruncated(t *testing.T, g *golden, fs vfs.FS, num uint32, n uint64, c *truncCounts) {
	t.Helper()
	where := fmt.Sprintf("blob file %d cut at %d", num, n)
	o := g.opts
	o.FS = fs
	db, err := openNoPanic(&o)
	if errors.Is(err, errPanicked) {
		c.panics++
		t.Fatalf("%s: Open: %v", where, err)
	}
	if err != nil {
		if !errors.Is(err, ErrCorruption) {
			t.Fatalf("%s: Open = %v, want success or ErrCorruption", where, err)
		}
		c.openErrs++
		return
	}
	defer db.Close()
	for i, h := range g.headers {
		want := readExact
		if h.BlobFile == num && h.ExtentOffset+h.ExtentLength > n {
			want = readCorrupt
		}
		out, err := readBack(db, g.packets[i], g.ids[i])
		if out == readPanic {
			c.panics++
		}
		if out != want {
			t.Fatalf("%s: packet %d (extent [%d, +%d)) read %v (%v), want %v", where, i, h.ExtentOffset, h.ExtentLength, out, err, want)
		}
		if out == readExact {
			c.exact++
		} else {
			c.corrupt++
		}
	}
	p := randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 30, 999)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: Put after recovery: %v", where, err)
	}
	checkPacket(t, db, p, id)
}
