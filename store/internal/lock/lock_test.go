package lock

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFlock: on the OS's file system a writer excludes everyone, readers
// share, and releasing a lock lets the next holder in.
func TestFlock(t *testing.T) {
	if !FlockSupported {
		t.Skip("no flock on this platform: every lock is FS.Lock (TestMemFS)")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	w, shared, err := Dir(vfs.Default, vfs.Default, path, false)
	if err != nil || shared {
		t.Fatalf("exclusive lock: shared %v, %v", shared, err)
	}
	if _, _, err := Dir(vfs.Default, vfs.Default, path, true); !errors.Is(err, ErrHeld) {
		t.Fatalf("reader while a writer holds it: %v, want ErrHeld", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1, shared, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil || !shared {
		t.Fatalf("first reader: shared %v, %v", shared, err)
	}
	r2, _, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil {
		t.Fatalf("second reader beside the first: %v", err)
	}
	if _, _, err := Dir(vfs.Default, vfs.Default, path, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("writer while readers hold it: %v, want ErrHeld", err)
	}
	r1.Close()
	r2.Close()
	w, _, err = Dir(vfs.Default, vfs.Default, path, false)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	w.Close()
}

// TestMemFS: on another FS every lock is FS.Lock, exclusive, read-only
// included, and NoLockFS takes nothing.
func TestMemFS(t *testing.T) {
	fs := vfs.NewMem()
	l, shared, err := Dir(fs, fs, "LOCK", true)
	if err != nil || shared {
		t.Fatalf("read-only lock on a mem FS: shared %v, %v", shared, err)
	}
	if _, _, err := Dir(fs, fs, "LOCK", true); err == nil {
		t.Fatal("a second lock on a mem FS was granted")
	}
	n := NoLockFS{FS: fs}
	c, err := n.Lock("LOCK")
	if err != nil {
		t.Fatalf("NoLockFS.Lock: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, _, err = Dir(fs, fs, "LOCK", false); err != nil {
		t.Fatalf("after release: %v", err)
	}
	l.Close()
}
