package store

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
