package bloblog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// TestFilePreopen: Preopen opens and maps a blob file as its first read
// would, and the read then uses that mapping; a file that cannot be
// opened (missing, or its header names another file) is left closed and
// its first read reports the damage, as without Preopen; on a file system
// without mmap it only opens the handle.
func TestFilePreopen(t *testing.T) {
	dir := t.TempDir()
	body := append(format.EncodeBlobHeader(1), make([]byte, 64<<10)...)
	if err := os.WriteFile(filepath.Join(dir, FileName(1)), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName(3)), body, 0o644); err != nil { // header names file 1
		t.Fatal(err)
	}
	f := NewFile(vfs.Default, dir, 1, true, 0, quiet)
	defer f.Release()
	f.Preopen()
	if !f.IsOpen() || f.mapped != MmapSupported || len(f.maps) != map[bool]int{true: 1, false: 0}[MmapSupported] {
		t.Fatalf("after Preopen: open %v, mapped %v, %d mappings", f.IsOpen(), f.mapped, len(f.maps))
	}
	f.Preopen() // again: nothing more
	b, err := f.Span(format.BlobHeaderSize, 64<<10)
	if err != nil || (b == nil) == MmapSupported || len(f.maps) > 1 {
		t.Fatalf("Span after Preopen: %v (mapped %v, %d mappings)", err, b != nil, len(f.maps))
	}

	for _, num := range []uint32{2, 3} { // 2 is missing
		g := NewFile(vfs.Default, dir, num, true, 0, quiet)
		g.Preopen()
		if g.IsOpen() || len(g.maps) != 0 {
			t.Errorf("file %d: open %v with %d mappings after a failed Preopen", num, g.IsOpen(), len(g.maps))
		}
		if _, err := g.Span(format.BlobHeaderSize, 16); !errors.Is(err, ErrCorruption) {
			t.Errorf("file %d: first read after a failed Preopen: %v, want ErrCorruption", num, err)
		}
		g.Release()
	}

	mem := vfs.NewMem()
	if err := mem.MkdirAll("/blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := mem.Create("/blobs/"+FileName(1), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	m := NewFile(mem, "/blobs", 1, true, 0, quiet)
	defer m.Release()
	m.Preopen()
	if !m.IsOpen() || m.mapped || len(m.maps) != 0 {
		t.Fatalf("MemFS file after Preopen: open %v, mapped %v, %d mappings", m.IsOpen(), m.mapped, len(m.maps))
	}
}
