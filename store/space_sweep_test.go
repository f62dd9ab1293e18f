package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store/internal/space"
)

// The disk-full sweep (RELIABILITY.md, "The full-disk sweep over memtable sizes"): for each catalog
// memtable size, runs that fill a real tmpfs through the store with small
// Puts, read every packet back (so that Close has access statistics to
// save), and on every other run fill what the store left free with a file
// of its own (another process filling the disk, so that the catalog's
// flushes fail); then Close, reopen read-write, delete the older half of
// the packets with a gc after every 256 deletes (each Delete appends a
// 4 KiB tombstone, as much as one of these packets takes, so freeing room
// needs the files the deletes empty removed as they go), remove the
// filler, gc and compact, and Put again. Every Open and Close
// must return within 5 s (a hang is what used to happen: Close blocked on
// Pebble's write stall while its flush retried ENOSPC forever), and no
// cleanup step may be refused. The short form runs in CI; the long one,
// every memtable size from 1 to 64 MiB 20 times, behind KVSTORE_LONG=1.

// sweepDeadline is how long an Open or a Close may take.
const sweepDeadline = 5 * time.Second

// sweepRun is what one run saw.
type sweepRun struct {
	packets        int
	open, close    time.Duration // the longest Open and Close
	refused        error         // a cleanup step that failed
	closeFullError error         // what Close said with the disk full (allowed)
}

// returnsWithin runs fn, and reports false if it does not return within d (it is
// then left running: the store is stuck).
func returnsWithin(d time.Duration, fn func()) (time.Duration, bool) {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return time.Since(start), true
	case <-time.After(d):
		return d, false
	}
}

// fillDisk writes path until the file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{1 << 20, 4 << 10} {
		for err == nil {
			_, err = f.Write(make([]byte, n))
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling the disk: %v", err)
		}
		err = nil
	}
}

// sweepOnce is one run for memtable size m; filler says whether a file
// fills what the store left free. A hang fails t at once.
func sweepOnce(t *testing.T, m uint64, filler bool, seed uint64) (r sweepRun) {
	sz := space.For(m)
	data := 6*m + 16<<20 // the refill needs the deleted half to cover the reserve twice over
	mnt := testenv.SmallFS(t, int64(uint64(sz.Reserve)+sz.Headroom+data))
	dir := mnt + "/store"
	o := &Options{Logger: quiet, CatalogMemTableSize: m, BlobFileSize: 4 << 20, AccessFlushInterval: -1}
	var db *DB
	var err error
	open := func(what string) bool {
		d, ok := returnsWithin(sweepDeadline, func() { db, err = Open(dir, o) })
		if !ok {
			t.Fatalf("memtable %d MiB: Open (%s) did not return within %v", m>>20, what, sweepDeadline)
		}
		r.open = max(r.open, d)
		if err != nil {
			r.refused = fmt.Errorf("open (%s): %w", what, err)
		}
		return err == nil
	}
	closeDB := func(what string) error {
		d, ok := returnsWithin(sweepDeadline, func() { err = db.Close() })
		if !ok {
			t.Fatalf("memtable %d MiB: Close (%s) did not return within %v", m>>20, what, sweepDeadline)
		}
		r.close = max(r.close, d)
		return err
	}
	if !open("fresh") {
		return r
	}
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	var ids []format.PacketID
	for n := 0; ; n++ {
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 40, seed<<32|uint64(n)))
		if errors.Is(err, ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("memtable %d MiB: Put %d: %v", m>>20, n, err)
		}
		ids = append(ids, id)
	}
	r.packets = len(ids)
	for _, id := range ids {
		v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
		if err != nil {
			t.Fatalf("memtable %d MiB: Get: %v", m>>20, err)
		}
		v.Release()
	}
	if filler {
		fillDisk(t, mnt+"/filler")
	}
	if err := closeDB("full disk"); err != nil {
		if !filler {
			r.refused = fmt.Errorf("close of the full store: %w", err)
			return r
		}
		r.closeFullError = err
	}
	if !open("full disk") {
		return r
	}
	defer func() {
		if err := closeDB("refilled"); err != nil && r.refused == nil {
			r.refused = fmt.Errorf("close after the refill: %w", err)
		}
	}()
	for i := range len(ids) / 2 {
		if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[i]); err != nil {
			r.refused = fmt.Errorf("delete %d of %d: %w", i, len(ids)/2, err)
			return r
		}
		if i%256 == 255 {
			if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
				r.refused = fmt.Errorf("gc after %d deletes: %w", i+1, err)
				return r
			}
		}
	}
	if filler {
		if err := os.Remove(mnt + "/filler"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
		r.refused = fmt.Errorf("gc: %w", err)
		return r
	}
	if _, err := db.Compact(context.Background(), CompactOptions{}); err != nil {
		r.refused = fmt.Errorf("compact: %w", err)
		return r
	}
	if _, err := db.GC(context.Background(), GCOptions{}); err != nil { // re-creates the reserve
		r.refused = fmt.Errorf("gc after compact: %w", err)
		return r
	}
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 40, seed<<32|1<<31)); err != nil {
		r.refused = fmt.Errorf("put after the cleanup (%+v): %w", db.Stats().ReserveBytes, err)
	}
	return r
}

// TestFullDiskSweep is the sweep: memtables of 1 and 2 MiB, 4 runs each,
// in the short form; 1 to 64 MiB, 20 runs each, in the long form.
func TestFullDiskSweep(t *testing.T) {
	sizes := []uint64{1, 2}
	if longForm() {
		sizes = []uint64{1, 2, 4, 8, 16, 32, 64}
	}
	runs := pick(4, 20)
	for _, mib := range sizes {
		t.Run(fmt.Sprintf("memtable=%dMiB", mib), func(t *testing.T) {
			var refused, closeErrs, packets int
			var open, closeT time.Duration
			for run := range runs {
				r := sweepOnce(t, mib<<20, run%2 == 1, uint64(mib)<<8|uint64(run))
				packets += r.packets
				open, closeT = max(open, r.open), max(closeT, r.close)
				if r.closeFullError != nil {
					closeErrs++
				}
				if r.refused != nil {
					refused++
					t.Errorf("run %d (filler %v): refused: %v", run, run%2 == 1, r.refused)
				}
			}
			t.Logf("memtable %d MiB: %d runs (half with a filler), %d packets a run on average, 0 hangs, %d refused cleanups, longest Open %v, longest Close %v, %d Closes on a disk filled by another file returned an error",
				mib, runs, packets/runs, refused, open.Round(time.Millisecond), closeT.Round(time.Millisecond), closeErrs)
		})
	}
}
