package bloblog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestGatherWriter writes the same buffers, more than one pwritev call's
// worth (IOV_MAX is 1024), through the vectored path and through
// WriteAt one by one, and reads both files back.
func TestGatherWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var bufs [][]byte
	var want []byte
	for range 2500 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	const at = 4096
	dir := t.TempDir()
	for _, vectored := range []bool{true, false} {
		path := filepath.Join(dir, "f")
		f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		fd := uintptr(vfs.InvalidFd)
		if vectored {
			if fd = f.Fd(); fd == vfs.InvalidFd {
				t.Fatal("the OS file system's file has no descriptor")
			}
		}
		w := gatherWriter{f: f, fd: fd, name: path, at: at}
		for i, b := range bufs {
			w.add(b)
			if i%700 == 699 {
				if err := w.flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.flush(); err != nil {
			t.Fatalf("vectored %v: %v", vectored, err)
		}
		if w.at != at+uint64(len(want)) {
			t.Fatalf("vectored %v: writer at %d, want %d", vectored, w.at, at+len(want))
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[at:], want) || !bytes.Equal(got[:at], make([]byte, at)) {
			t.Fatalf("vectored %v: file differs from the buffers written", vectored)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGatherWriterError reports a failed vectored write with the file's
// name and keeps failing.
func TestGatherWriterError(t *testing.T) {
	if !haveVectoredWrites {
		t.Skip("no vectored writes on this platform")
	}
	path := filepath.Join(t.TempDir(), "ro")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path) // read-only: writes fail
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gatherWriter{f: f, fd: f.Fd(), name: path}
	w.add([]byte("abc"))
	err = w.flush()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(path)) {
		t.Fatalf("flush on a read-only file: %v, want an error naming %s", err, path)
	}
	w.add([]byte("d"))
	if w.flush() == nil {
		t.Fatal("a gatherWriter that failed accepted more")
	}
}
