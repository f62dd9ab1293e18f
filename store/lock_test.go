package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSharedReadOnlyOpens: on the OS's file system two read-only opens of
// a store nobody writes run side by side and both read; a writer is
// refused while they hold it, and a reader while a writer does.
func TestSharedReadOnlyOpens(t *testing.T) {
	if !flockSupported {
		t.Skip("no flock here: every open is exclusive")
	}
	dir := t.TempDir()
	db, err := Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p := spacePacket(1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{Logger: quiet, ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open while a writer holds the store: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro := &Options{Logger: quiet, ReadOnly: true}
	r1, err := Open(dir, ro)
	if err != nil {
		t.Fatalf("first read-only Open: %v", err)
	}
	defer r1.Close()
	r2, err := Open(dir, ro)
	if err != nil {
		t.Fatalf("second read-only Open beside the first: %v", err)
	}
	for i, r := range []*DB{r1, r2} {
		checkPacket(t, r, p, id)
		if n := r.Stats().Packets; n != 1 {
			t.Fatalf("reader %d sees %d packets, want 1", i+1, n)
		}
	}
	if _, err := Open(dir, &Options{Logger: quiet}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-write Open while readers hold the store: %v, want ErrLocked", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{Logger: quiet}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-write Open while one reader holds the store: %v, want ErrLocked", err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, &Options{Logger: quiet})
	if err != nil {
		t.Fatalf("read-write Open once the readers closed: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockWaitNotStarved: two goroutines reopen the store read-only in a
// loop, one always holding it; a read-write Open with LockWait gets in
// every time (readers arriving while it waits are refused with ErrLocked),
// and one without LockWait is refused at once.
func TestLockWaitNotStarved(t *testing.T) {
	if !flockSupported || runtime.GOOS != "linux" {
		t.Skip("a writer's mark needs Linux's open file description locks")
	}
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := Open(dir, &Options{ReadOnly: true})
				if err != nil {
					if !errors.Is(err, ErrLocked) {
						t.Errorf("read-only open: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				opened.Add(1)
				time.Sleep(20 * time.Millisecond)
				r.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for opened.Load() < 4 {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 3 {
		w, err := Open(dir, &Options{LockWait: 10 * time.Second})
		if err != nil {
			t.Fatalf("read-write open %d with LockWait beside looping readers: %v", i, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		for n := opened.Load(); opened.Load() < n+2; {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A create refused because the directory is not a store (it has no FORMAT
// file and holds other files) leaves nothing behind: the LOCK file used to
// be made before the directory was checked. On the OS's file system and on
// another FS (FS.Lock) alike.
func TestRefusedCreateLeavesNoLock(t *testing.T) {
	for _, mem := range []bool{false, true} {
		var o *Options
		dir := t.TempDir()
		list := func() []string {
			names, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, n := range names {
				s = append(s, n.Name())
			}
			return s
		}
		if mem {
			fs := vfs.NewMem()
			dir = "/user"
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(fs.PathJoin(dir, "notes.txt"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			o = &Options{FS: fs}
			list = func() []string {
				names, err := fs.List(dir)
				if err != nil {
					t.Fatal(err)
				}
				return names
			}
		} else if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, o)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "notes.txt") {
			t.Fatalf("mem %v: Open of a directory holding notes.txt: %v, want ErrInvalidArgument naming it", mem, err)
		}
		if names := list(); len(names) != 1 || names[0] != "notes.txt" {
			t.Fatalf("mem %v: a refused create left %v, want only notes.txt", mem, names)
		}
	}
}
