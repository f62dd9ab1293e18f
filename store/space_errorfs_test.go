package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

// diskFull makes the disk full from its operation number at on: every
// operation that takes space (creates, writes, preallocations, syncs),
// on any file, the catalog's included, fails with ENOSPC; at < 0 counts.
type diskFull struct {
	fs       vfs.FS // the file system under errorfs, to tell directories
	at       int64
	n        atomic.Int64
	injected atomic.Int64
}

func (d *diskFull) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpMkdirAll, errorfs.OpFilePreallocate,
		errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if st, err := d.fs.Stat(op.Path); err == nil && st.IsDir() {
		return nil // a directory sync takes no space (and Pebble panics on a failed one, by design)
	}
	if i := d.n.Add(1) - 1; d.at < 0 || i < d.at {
		return nil
	}
	d.injected.Add(1)
	return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
}

func (d *diskFull) String() string { return fmt.Sprintf("disk full from op %d", d.at) }

// spaceWorkload runs Open, Puts, a Delete, GC, Compact and Close, and
// returns every error it met.
func spaceWorkload(fs vfs.FS) []error {
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	db, err := Open("/db", &Options{FS: fs, Logger: quiet, BlobFileSize: 24 << 10})
	if err != nil {
		return append(errs, err)
	}
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	var ids []format.PacketID
	for i := range 4 {
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 40+120*(i%3), uint64(i)))
		note(err)
		if err == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		note(db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[0]))
	}
	_, err = db.GC(context.Background(), GCOptions{})
	note(err)
	_, err = db.Compact(context.Background(), CompactOptions{LiveRatio: 1})
	note(err)
	note(db.Close())
	return errs
}

// unsyncedCommits is how many catalog batches spaceWorkload commits behind
// the blob log (commitLogged: 4 Puts, 1 Delete), each followed by a kick of
// the background sync.
const unsyncedCommits = 5

// TestENOSPCEverywhere fills the disk at each space-taking operation of
// the workload in turn: every error that follows must wrap ErrNoSpace and
// syscall.ENOSPC, whichever layer (blob writer, sync, catalog WAL, FORMAT,
// compaction) met the full disk.
func TestENOSPCEverywhere(t *testing.T) {
	mem := vfs.NewMem()
	dry := &diskFull{fs: mem, at: -1}
	if errs := spaceWorkload(errorfs.Wrap(mem, dry)); len(errs) > 0 {
		t.Fatalf("dry run: %v", errs)
	}
	ops := dry.n.Load()
	t.Logf("%d space-taking operations", ops)
	failed := int64(0)
	for at := range ops {
		mem := vfs.NewMem()
		d := &diskFull{fs: mem, at: at}
		errs := spaceWorkload(errorfs.Wrap(mem, d))
		if len(errs) > 0 {
			failed++
		}
		for _, err := range errs {
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("disk full from op %d: %v, want ErrNoSpace and ENOSPC", at, err)
			}
		}
		// The catalog's background syncs (catalog.Syncer) coalesce as they
		// race the writers: 1 to 5 of them in this workload, a WAL write
		// and a sync each. So a run may end a few operations before the dry
		// run did, and a full disk from one of the last ones meets nothing.
		if d.injected.Load() == 0 && at < ops-2*unsyncedCommits {
			t.Errorf("disk full from op %d of %d: nothing injected", at, ops)
		}
	}
	t.Logf("%d of %d runs met the full disk as an error", failed, ops)
	if failed < ops/2 {
		t.Errorf("only %d of %d runs returned an error: the full disk went unnoticed", failed, ops)
	}
}
