package store

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestAdviseWillNeedRanges asks for unaligned ranges at the start, inside
// and at the end of a mapping: the widening to whole pages must stay inside
// it (else madvise fails with ENOMEM) and start on a page (else EINVAL).
func TestAdviseWillNeedRanges(t *testing.T) {
	if !mmapSupported {
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
		if err := adviseWillNeed(m[r[0]:r[1]]); err != nil {
			t.Errorf("adviseWillNeed [%d, %d): %v", r[0], r[1], err)
		}
	}
	for i := range data {
		if m[i] != data[i] {
			t.Fatalf("byte %d reads %d, want %d", i, m[i], data[i])
		}
	}
}

// TestViewAdvisesOnFirstVerify checks that a mapped view asks for its
// extent when it first verifies a chunk, and that views that copy, or do
// not verify, do not.
func TestViewAdvisesOnFirstVerify(t *testing.T) {
	for _, k := range storeKinds {
		for _, noCRC := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/checksums=%v", k.name, !noCRC), func(t *testing.T) {
				db, fs, dir := openKind(t, k.disk, k.noMmap)
				if noCRC {
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
					var err error
					if db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, DisableChecksums: true, BlobFileSize: 128 << 10, Logger: quiet}); err != nil {
						t.Fatal(err)
					}
				}
				defer db.Close()
				spec := testSpec(format.DTypeBF16, 3, 2, 8)
				id, err := db.Put(randPacket(spec, "ns", 9, 4))
				if err != nil {
					t.Fatal(err)
				}
				v, err := db.Get("ns", spec.Fingerprint(), id)
				if err != nil {
					t.Fatal(err)
				}
				defer v.Release()
				if v.advised.Load() {
					t.Fatal("advised before any chunk was read")
				}
				if _, _, err := v.Layer(0); err != nil {
					t.Fatal(err)
				}
				if got, want := v.advised.Load(), k.mapped && !noCRC; got != want {
					t.Fatalf("advised = %v after the first read, want %v", got, want)
				}
			})
		}
	}
}

// TestResident checks resident on a mapping of a file just written (its
// pages are cached) and on an empty slice.
func TestResident(t *testing.T) {
	if !mmapSupported {
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
	if want := runtime.GOOS == "linux"; resident(m[os.Getpagesize()+7:]) != want {
		t.Errorf("resident of a just-written page = %v, want %v", !want, want)
	}
	if resident(m[:0]) {
		t.Error("resident of an empty slice")
	}
}
