package bloblog

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestAdviseWillNeedRanges asks for unaligned ranges at the start, inside
// and at the end of a mapping: the widening to whole pages must stay inside
// it (else madvise fails with ENOMEM) and start on a page (else EINVAL).
func TestAdviseWillNeedRanges(t *testing.T) {
	if !MmapSupported {
		t.Skip("no mmap on this platform")
	}
	page := os.Getpagesize()
	data := make([]byte, 3*page+100)
	for i := range data {
		data[i] = byte(i)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := mmapFile(f.Fd(), 4*page)
	if err != nil {
		t.Fatal(err)
	}
	defer munmapFile(m)
	for _, r := range [][2]int{{0, 1}, {1, page + 1}, {page - 1, 2*page + 1}, {len(data) - 1, len(data)}, {0, len(data)}, {5, 5}} {
		if err := AdviseWillNeed(m[r[0]:r[1]]); err != nil {
			t.Errorf("adviseWillNeed [%d, %d): %v", r[0], r[1], err)
		}
	}
	for i := range data {
		if m[i] != data[i] {
			t.Fatalf("byte %d reads %d, want %d", i, m[i], data[i])
		}
	}
}

// TestResident checks resident on a mapping of a file just written (its
// pages are cached) and on an empty slice.
func TestResident(t *testing.T) {
	if !MmapSupported {
		t.Skip("no mmap on this platform")
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 3*os.Getpagesize()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := mmapFile(f.Fd(), 3*os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer munmapFile(m)
	if want := runtime.GOOS == "linux"; Resident(m[os.Getpagesize()+7:]) != want {
		t.Errorf("Resident of a just-written page = %v, want %v", !want, want)
	}
	if Resident(m[:0]) {
		t.Error("Resident of an empty slice")
	}
}
